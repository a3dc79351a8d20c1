// Transcendentals with the same bits on every CPU and every C library, for what a layer range
// computes besides products (RoPE frequencies and angles): a session shard on another CPU
// must give the client's local bits (PROTOCOL §13). glibc picks its sin, cos, log and pow by
// CPU (FMA or not) and promises under 1 ulp, not one answer. Each function here is one fixed
// sequence of IEEE double additions, multiplications and divisions (this file's translation
// unit is compiled without contraction into fused multiply-adds), accurate to a few double
// ulps (pow to some tens: e·ln b carries log's error up), so that a result rounded to f32 is
// the correctly rounded one except within about 2^-46 of a midpoint. e^x of f32 values is kernels/exp.h's.
#pragma once

namespace larql {

double portable_exp(double x);           // |x| ≤ 700
double portable_log(double x);           // x > 0 and finite
double portable_pow(double base, double exponent);  // base > 0: e^(exponent · ln base)
// sin x and cos x for |x| < 2^26 (RoPE angles: a position times a frequency ≤ 1).
void portable_sincos(double x, double& sine, double& cosine);

}  // namespace larql
