// The chat page of `larql api` in Debian's headless Chromium (puppeteer-core): on a
// phone-sized screen it asks for the server's key once, shows the model, sends a message
// with Enter and streams the answer, which must equal the API's own greedy answer to the
// same conversation. Any console error or page exception fails the run.
//   node chat_page.js BASE_URL API_KEY SCREENSHOT.png
// Prints JSON: {"model", "answer", "expected", "stats", "errors"}.
const { launch, watchedPage, run } = require("./page_support");
const [base, key, screenshot] = process.argv.slice(2);
const timeout = 60000;

async function main() {
  const browser = await launch();
  const errors = [];
  try {
    const page = await watchedPage(browser, 390, 844, errors);
    await page.goto(base + "/", { waitUntil: "load", timeout });
    await page.waitForSelector("#key-form.shown", { timeout });
    await page.type("#key", key);
    await page.click("#key-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("model").textContent.includes("context"), { timeout });
    const model = await page.$eval("#model", (e) => e.textContent);
    await page.$eval("#temperature", (e) => { e.value = "0"; });
    await page.$eval("#max-tokens", (e) => { e.value = "16"; });
    await page.type("#message", "And the LORD said unto Moses,");
    await page.keyboard.press("Enter");
    await page.waitForSelector(".turn.assistant[data-done]", { timeout });
    const [answer, stats] = await page.$eval(".turn.assistant", (e) => [
      [...e.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.data).join(""),
      e.querySelector(".stats").textContent,
    ]);
    await page.screenshot({ path: screenshot, fullPage: true });
    const r = await fetch(base + "/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
      body: JSON.stringify({ messages: [{ role: "user", content: "And the LORD said unto Moses," }], temperature: 0, max_tokens: 16 }),
    });
    const expected = (await r.json()).choices[0].message.content;
    console.log(JSON.stringify({ model, answer, expected, stats, errors }));
  } finally {
    await browser.close();
  }
}

run(main);
