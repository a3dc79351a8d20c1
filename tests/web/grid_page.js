// The router's grid page in Debian's headless Chromium (puppeteer-core): two shards of
// the demo model and a router (health polled every 200 ms) started here; the page (refresh
// 200 ms) shows both ranges up; one shard is killed and its range must turn down within
// the deadline, then the shard is started again on its port and the range must come back
// up. Any console error or page exception fails the run; every process started is killed.
//   node grid_page.js LARQL_BINARY MODEL_DIR SCREENSHOT.png
// Prints JSON: {"states": [...], "summary", "rows", "errors"}.
const { timeout, serve: larqlServe, stopped, stopAll, launch, watchedPage, run } = require("./page_support");
const [larql, model, screenshot] = process.argv.slice(2);
const serve = (args) => larqlServe(larql, args);

async function main() {
  const low = await serve(["serve", model, "--port", "0", "--layers", "0-2", "--threads", "1"]);
  let high = await serve(["serve", model, "--port", "0", "--layers", "3-5", "--threads", "1"]);
  const router = await serve(["router", "--port", "0", "--shards", `0-2=${low.url},3-5=${high.url}`, "--health-interval-ms", "200"]);
  const browser = await launch();
  const errors = [], states = [];
  try {
    const page = await watchedPage(browser, 1000, 800, errors);
    await page.goto(router.url + "/?refresh=200", { waitUntil: "load", timeout });
    const rangeIs = (range, state) => page.waitForFunction(
      (r, s) => { const e = document.querySelector(`.range[data-range="${r}"]`); return e && e.dataset.state === s; },
      { timeout }, range, state);
    await rangeIs("0-2", "up");
    await rangeIs("3-5", "up");
    states.push("both up");
    await stopped(high.proc);
    await rangeIs("3-5", "down");
    await rangeIs("0-2", "up");
    states.push("3-5 down");
    high = await serve(["serve", model, "--port", new URL(high.url).port, "--layers", "3-5", "--threads", "1"]);
    await rangeIs("3-5", "up");
    states.push("3-5 up again");
    await new Promise((r) => setTimeout(r, 600));  // a few more samples for the plot (bounded)
    const summary = await page.$eval("#summary", (e) => e.textContent);
    const rows = await page.$$eval("#replicas tr", (trs) => trs.map((tr) => tr.textContent));
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(JSON.stringify({ states, summary, rows, errors }));
  } finally {
    await browser.close();
    await stopAll();
  }
}

run(main);
