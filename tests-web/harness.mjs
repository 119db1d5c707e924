// Shared by the browser tests and the benchmark: Debian's Chromium driven by playwright-core
// (never a downloaded browser), against the server `cargo xtask test-web` started.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BASE_URL = process.env.TINYGPT_URL || 'http://127.0.0.1:8080/';
/** The example page on the packed npm package (examples/web-page/), served on its own port. */
export const EXAMPLE_URL = process.env.TINYGPT_EXAMPLE_URL;
export const ARTIFACTS = process.env.TINYGPT_ARTIFACTS || 'target/web-artifacts';
const EXECUTABLE = process.env.TINYGPT_CHROMIUM || '/usr/bin/chromium';

const FLAGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
  // A hidden tab's timers are throttled; the worker's are not, but keep the page honest.
  '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding',
];

/** WebGPU in headless Chromium: a SwiftShader (software) adapter, `isFallbackAdapter`. */
export const WEBGPU_FLAGS = ['--enable-unsafe-webgpu'];

/**
 * A fresh browser profile (so OPFS and IndexedDB start empty), kept across reloads of
 * the one context it returns. Call `close()` when done. `args` adds Chromium flags (e.g.
 * `WEBGPU_FLAGS`).
 */
export async function openBrowser({ args = [] } = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'tinygpt-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: EXECUTABLE,
    headless: true,
    args: [...FLAGS, ...args],
    viewport: { width: 1280, height: 1400 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * A page with console errors, page errors and main-thread long tasks recorded from the
 * first script on: `page.consoleErrors`, `page.pageErrors`, and `window.__longTasks`.
 */
export async function openPage(context, query = '') {
  const page = context.pages()[0] && context.pages()[0].url() === 'about:blank' ? context.pages()[0] : await context.newPage();
  page.consoleErrors = [];
  page.pageErrors = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => page.pageErrors.push(String(e)));
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration });
    }).observe({ type: 'longtask', buffered: true });
  });
  await page.goto(new URL(query, BASE_URL).href);
  await waitReady(page);
  return page;
}

/** Waits until the worker said `ready` and the default dataset is shown. */
export async function waitReady(page) {
  await page.waitForFunction(() => window.tinygpt && window.tinygpt.state.ready && window.tinygpt.state.dataset, null, {
    timeout: 60_000,
  });
}

/** Sets an advanced training field by its training_config.json name. */
export async function setField(page, name, value) {
  await page.evaluate(
    ([n, v]) => {
      const input = document.querySelector(`#training-fields [name="${n}"]`);
      input.value = String(v);
      input.dataset.edited = '1';
    },
    [name, value],
  );
}

export function waitStep(page, atLeast, timeout = 120_000) {
  return page.waitForFunction((n) => window.tinygpt.state.step >= n, atLeast, { timeout });
}

/**
 * Clicks `button` and resolves with the ms until the worker's answer of `type` for which
 * `predicate` (a JS expression over the message `m`) holds: how pause and stop latency is timed.
 */
export function timeAnswer(page, button, type, predicate) {
  return page.evaluate(
    ([button, type, predicate]) =>
      new Promise((resolve) => {
        const check = new Function('m', `return ${predicate};`);
        const t0 = performance.now();
        let answered = false;
        window.tinygpt.client.on(type, (m) => {
          if (!answered && check(m)) {
            answered = true;
            resolve(performance.now() - t0);
          }
        });
        document.getElementById(button).click();
      }),
    [button, type, predicate],
  );
}

/** The step the page last showed. */
export const stepNow = (page) => page.evaluate(() => window.tinygpt.state.step);
