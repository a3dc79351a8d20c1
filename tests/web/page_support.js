// What the page scripts share: larql servers started as children and stopped at the end,
// and headless Chromium with every console error and page exception collected.
const { spawn } = require("child_process");
const puppeteer = require("puppeteer-core");

const timeout = 20000;
const children = [];

// A larql server; resolves with its URL once it prints "listening on".
function serve(larql, args) {
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

function stopAll() { return Promise.all(children.map(stopped)); }

// Debian's Chromium, headless; a page of the given size whose console errors and page
// exceptions go to `errors`.
async function launch() {
  return puppeteer.launch({
    executablePath: process.env.LARQL_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless=new", "--no-sandbox", "--remote-debugging-port=0"],
  });
}
async function watchedPage(browser, width, height, errors) {
  const page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.setViewport({ width, height });
  return page;
}

// Runs `main`; on a failure prints it, stops every server and exits 1.
function run(main) {
  main().catch(async (e) => {
    console.error(String(e));
    await stopAll();
    process.exit(1);
  });
}

module.exports = { timeout, serve, stopped, stopAll, launch, watchedPage, run };
