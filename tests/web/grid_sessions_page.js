// The router's grid page over session shards (PROTOCOL §13), in Debian's headless Chromium:
// two session shards of the demo model and a router; a session opened through the router
// shows as one open session on one replica of each range, and the summary counts it.
//   node grid_sessions_page.js LARQL_BINARY MODEL_DIR SCREENSHOT.png
// Prints JSON: {"summary", "rows", "errors"}.
const { spawn } = require("child_process");
const puppeteer = require("puppeteer-core");
const [larql, model, screenshot] = process.argv.slice(2);
const timeout = 20000;
const children = [];

// A larql server; resolves with its URL once it prints "listening on".
function serve(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(larql, args, { stdio: ["ignore", "pipe", "pipe"] });
    children.push(p);
    let out = "";
    const timer = setTimeout(() => reject(new Error("no 'listening on' from larql " + args.join(" "))), timeout);
    const read = (d) => {
      out += d;
      const m = /listening on (http:\/\/[0-9.]+:[0-9]+)/.exec(out);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[1] }); }
    };
    p.stdout.on("data", read);
    p.stderr.on("data", read);
    p.on("exit", (code) => { clearTimeout(timer); if (!/listening on/.test(out)) reject(new Error("larql " + args.join(" ") + " exited " + code + ": " + out)); });
  });
}

function stopped(p) {
  return new Promise((resolve) => { if (p.exitCode !== null || p.signalCode) resolve(); else { p.on("exit", resolve); p.kill("SIGTERM"); } });
}

async function main() {
  const low = await serve(["serve", model, "--port", "0", "--layers", "0-2", "--threads", "1", "--sessions"]);
  const high = await serve(["serve", model, "--port", "0", "--layers", "3-5", "--threads", "1", "--sessions"]);
  const router = await serve(["router", "--port", "0", "--shards", `0-2=${low.url},3-5=${high.url}`, "--health-interval-ms", "200"]);
  const opened = await fetch(router.url + "/v1/sessions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ max_positions: 16 }),
  });
  if (opened.status !== 201) throw new Error("opening a session answered " + opened.status);
  const browser = await puppeteer.launch({
    executablePath: process.env.LARQL_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless=new", "--no-sandbox", "--remote-debugging-port=0"],
  });
  const errors = [];
  try {
    const page = await browser.newPage();
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.setViewport({ width: 1000, height: 800 });
    await page.goto(router.url + "/?refresh=200", { waitUntil: "load", timeout });
    await page.waitForFunction(() => /sessions open: 1/.test(document.querySelector("#summary").textContent), { timeout });
    const summary = await page.$eval("#summary", (e) => e.textContent);
    const rows = await page.$$eval("#replicas tr", (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(JSON.stringify({ summary, rows, errors }));
  } finally {
    await browser.close();
    await Promise.all(children.map(stopped));
  }
}

main().catch(async (e) => {
  console.error(String(e));
  await Promise.all(children.map(stopped));
  process.exit(1);
});
