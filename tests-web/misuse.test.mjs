// The page and the worker under misuse (issue 7): messages that are not messages, a worker
// that dies, two tabs training one run.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openBrowser, openPage, setField } from './harness.mjs';

/** Posts `message` straight to the worker and resolves with the next `error` it answers. */
function nextErrorAfter(page, message) {
  return page.evaluate(
    (message) =>
      new Promise((resolve) => {
        let done = false;
        window.tinygpt.client.on('error', (m) => {
          if (!done) {
            done = true;
            resolve(m);
          }
        });
        window.tinygpt.client.worker.postMessage(message);
      }),
    message,
  );
}

/**
 * Trains tiny with a checkpoint every 25 steps until one is saved at `savedStep` or later. The
 * run is far too long to end during a test: tiny trains about 50 steps a second in the threads
 * build, and a 400-step run once ended (and freed its lock) before a second tab had loaded.
 */
async function trainUntilSaved(page, savedStep) {
  await setField(page, 'max_steps', 100_000);
  await setField(page, 'checkpoint_interval', 25);
  await setField(page, 'eval_interval', 25);
  await setField(page, 'eval_batches', 2);
  await page.click('#train');
  await page.waitForFunction((n) => (window.tinygpt.state.lastSaved?.step ?? 0) >= n, savedStep, { timeout: 120_000 });
  return page.evaluate(() => window.tinygpt.state.lastSaved);
}

/**
 * In the page: starts a worker that holds a sync access handle on every file of checkpoint
 * generation `id`, and resolves once they are held (`window.__reader` is the worker).
 */
function holdGeneration(id) {
  const source = `onmessage = async (e) => {
    const root = await navigator.storage.getDirectory();
    const dir = await (await root.getDirectoryHandle('tinygpt-checkpoints')).getDirectoryHandle(e.data);
    const held = [];
    for await (const [, file] of dir.entries()) held.push(await file.createSyncAccessHandle());
    postMessage(held.length);
  };`;
  window.__reader = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
  return new Promise((resolve, reject) => {
    window.__reader.onmessage = (e) => (e.data > 0 ? resolve(e.data) : reject(new Error(`no files in ${id}`)));
    window.__reader.onerror = (e) => reject(new Error(e.message));
    window.__reader.postMessage(id);
  });
}

test('a null message is answered with badMessage, not internal, and the worker keeps working', { timeout: 120_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=memory');
    const error = await nextErrorAfter(page, null);
    assert.equal(error.code, 'badMessage', error.message);
    assert.match(error.message, /instead of a message/);
    const unknown = await nextErrorAfter(page, { type: 'dance' });
    assert.equal(unknown.code, 'badMessage');
    assert.match(unknown.message, /does not know messages of type "dance"/);
    // A loadBase without what it needs is refused in a sentence that says what to send
    // (issue 33: it was `loadBase needs "bytes"…`).
    for (const message of [{ type: 'loadBase', source: 'upload' }, { type: 'loadBase', source: 'checkpoint' }]) {
      const refused = await nextErrorAfter(page, message);
      assert.equal(refused.code, 'badMessage', refused.message);
      assert.match(refused.message, /^[A-Z]/, refused.message);
      assert.match(refused.message, /[.]$/, refused.message);
      assert.match(refused.message, /send/i, refused.message);
    }
    // Still answering: a real message after them.
    const noRun = await nextErrorAfter(page, { type: 'pause' });
    assert.equal(noRun.code, 'noRun');
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('a worker that dies is noticed, explained in plain words, and restarted from the last checkpoint', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context);
    const saved = await trainUntilSaved(page, 25);
    // Kill the worker as a wasm trap would: an uncaught error in its global scope.
    const [worker] = page.workers();
    await worker.evaluate(() =>
      setTimeout(() => {
        throw new WebAssembly.RuntimeError('unreachable');
      }),
    );
    const notice = page.locator('.notice[data-code="workerCrashed"]');
    await notice.waitFor({ timeout: 30_000 });
    const text = await notice.textContent();
    assert.match(text, /worker stopped/i);
    assert.match(text, /memory/);
    assert.match(text, /checkpoints are safe/);
    assert.equal(await page.textContent('#status-pill'), 'Worker stopped');
    const at = await page.evaluate(() => window.tinygpt.state.lastSaved);
    assert.ok(at.step >= saved.step);
    assert.match(text, new RegExp(`${at.id} holds step ${at.step}`));

    await notice.locator('button:has-text("Restart from the last checkpoint")').click();
    await page.waitForFunction(
      (id) => window.tinygpt.state.run?.checkpointId === id && window.tinygpt.state.runState === 'training',
      at.id,
      { timeout: 60_000 },
    );
    await page.waitForFunction((n) => window.tinygpt.state.step > n, at.step, { timeout: 60_000 });
    assert.equal(await page.evaluate(() => window.tinygpt.state.firstProgressStep), at.step + 1, 'it continues after the checkpoint');
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('a worker that dies with checkpoints kept in its memory says the run is lost and restarts the worker', { timeout: 120_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=memory');
    await page.click('#train');
    await page.waitForFunction(() => window.tinygpt.state.step >= 3, null, { timeout: 60_000 });
    const [worker] = page.workers();
    await worker.evaluate(() =>
      setTimeout(() => {
        throw new WebAssembly.RuntimeError('unreachable');
      }),
    );
    const notice = page.locator('.notice[data-code="workerCrashed"]');
    await notice.waitFor({ timeout: 30_000 });
    assert.match(await notice.textContent(), /kept its checkpoints in the worker's memory, so the run is lost/);
    await notice.locator('button:has-text("Restart the worker")').click();
    await page.waitForFunction(() => window.tinygpt.state.ready, null, { timeout: 60_000 });
    assert.equal(await page.textContent('#status-pill'), 'Ready');
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('a second tab says another tab is training the run, and trains it only once the first pauses', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const first = await openPage(browser.context);
    const saved = await trainUntilSaved(first, 25);

    // The second tab offers the first tab's run ("Resume last run") and is refused.
    const second = await openPage(browser.context);
    await second.waitForSelector('#resume-banner:not([hidden])', { timeout: 30_000 });
    // Another context reading the offered generation at this very moment (the first tab listing
    // its checkpoints does) holds an exclusive sync access handle on each of its files: loading
    // must read past it (it once failed here with NoModificationAllowedError, now and then).
    const offered = await second.evaluate(() => window.tinygpt.state.checkpoints[0].id);
    await second.evaluate(holdGeneration, offered);
    await second.click('#resume-last');
    const notice = second.locator('.notice[data-code="runLocked"]');
    await notice.waitFor({ timeout: 30_000 });
    await second.evaluate(() => window.__reader.terminate());
    assert.match(await notice.textContent(), /Another tab of this site is training this run/);
    assert.equal(await second.evaluate(() => window.tinygpt.state.runState), 'paused', 'the second tab does not train');

    // The first tab trains and saves on, untouched.
    await first.waitForFunction((n) => window.tinygpt.state.lastSaved.step > n, saved.step, { timeout: 120_000 });
    await first.click('#pause');
    await first.waitForFunction(() => window.tinygpt.state.runState === 'paused');
    const last = await first.evaluate(() => window.tinygpt.state.lastSaved);

    // Paused, the run is free: the second tab may train it now.
    await second.click('#resume');
    await second.waitForFunction(() => window.tinygpt.state.runState === 'training', null, { timeout: 30_000 });
    const before = await second.evaluate(() => window.tinygpt.state.step);
    await second.waitForFunction((n) => window.tinygpt.state.step > n, before, { timeout: 60_000 });
    // And the first tab's last checkpoint loads (nothing was corrupted): resume it in the first tab
    // once the second pauses.
    await second.click('#pause');
    await second.waitForFunction(() => window.tinygpt.state.runState === 'paused');
    await first.locator(`#checkpoint-rows tr[data-id="${last.id}"] button:has-text("Resume")`).click();
    await first.waitForFunction(
      (id) => window.tinygpt.state.run?.checkpointId === id && window.tinygpt.state.runState === 'training',
      last.id,
      { timeout: 60_000 },
    );
    assert.deepEqual(first.pageErrors, []);
    assert.deepEqual(second.pageErrors, []);
  } finally {
    await browser.close();
  }
});
