// The router's grid page over session shards (PROTOCOL §13), in Debian's headless Chromium:
// two session shards of the demo model and a router; a session opened through the router
// shows as one open session on one replica of each range, and the summary counts it.
//   node grid_sessions_page.js LARQL_BINARY MODEL_DIR SCREENSHOT.png
// Prints JSON: {"summary", "rows", "errors"}.
const { timeout, serve, stopAll, launch, watchedPage, run } = require("./page_support");
const [larql, model, screenshot] = process.argv.slice(2);

run(async () => {
  const low = await serve(larql, ["serve", model, "--port", "0", "--layers", "0-2", "--threads", "1", "--sessions"]);
  const high = await serve(larql, ["serve", model, "--port", "0", "--layers", "3-5", "--threads", "1", "--sessions"]);
  const router = await serve(larql, ["router", "--port", "0", "--shards", `0-2=${low.url},3-5=${high.url}`, "--health-interval-ms", "200"]);
  const opened = await fetch(router.url + "/v1/sessions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ max_positions: 16 }),
  });
  if (opened.status !== 201) throw new Error("opening a session answered " + opened.status);
  const browser = await launch();
  const errors = [];
  try {
    const page = await watchedPage(browser, 1000, 800, errors);
    await page.goto(router.url + "/?refresh=200", { waitUntil: "load", timeout });
    await page.waitForFunction(() => /sessions open: 1/.test(document.querySelector("#summary").textContent), { timeout });
    const summary = await page.$eval("#summary", (e) => e.textContent);
    const rows = await page.$$eval("#replicas tr", (trs) => trs.map((tr) => [...tr.children].map((c) => c.textContent)));
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(JSON.stringify({ summary, rows, errors }));
  } finally {
    await browser.close();
    await stopAll();
  }
});
