// Checkpoints in a real browser: OPFS by default, IndexedDB with ?storage=idb; resume
// after a reload; download and upload; errors that keep the saved run.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { openBrowser, openPage, setField, waitReady, waitStep } from './harness.mjs';

async function trainUntilSaved(page, savedStep) {
  await setField(page, 'max_steps', 400);
  await setField(page, 'checkpoint_interval', 25);
  await setField(page, 'eval_interval', 25);
  await setField(page, 'eval_batches', 2);
  await page.click('#train');
  await page.waitForFunction((n) => (window.tinygpt.state.lastSaved?.step ?? 0) >= n, savedStep, { timeout: 120_000 });
  await page.click('#pause');
  await page.waitForFunction(() => window.tinygpt.state.runState === 'paused');
  // A save started before the pause finishes before the pause is handled.
  return page.evaluate(() => window.tinygpt.state.lastSaved);
}

/** Every file under the origin's OPFS root, as `dir/name` paths. */
function opfsFiles(page) {
  return page.evaluate(async () => {
    const out = [];
    async function walk(dir, prefix) {
      for await (const [name, handle] of dir.entries()) {
        if (handle.kind === 'directory') await walk(handle, `${prefix}${name}/`);
        else out.push(`${prefix}${name}`);
      }
    }
    await walk(await navigator.storage.getDirectory(), '');
    return out.sort();
  });
}

async function reloadAndResume(page, saved) {
  await page.reload();
  await waitReady(page);
  await page.waitForSelector('#resume-banner:not([hidden])', { timeout: 30_000 });
  const banner = await page.textContent('#resume-text');
  assert.match(banner, new RegExp(`step ${saved.step} of 400`), banner);
  await page.click('#resume-last');
  await page.waitForFunction(() => window.tinygpt.state.firstProgressStep != null, null, { timeout: 60_000 });
  const state = await page.evaluate(() => ({
    runStep: window.tinygpt.state.run.step,
    checkpointId: window.tinygpt.state.run.checkpointId,
    first: window.tinygpt.state.firstProgressStep,
    history: window.tinygpt.state.run.history.length,
  }));
  assert.equal(state.runStep, saved.step, 'the run comes back at the saved step');
  assert.equal(state.checkpointId, saved.id);
  assert.equal(state.first, saved.step + 1, 'training continues with the next step');
  assert.equal(state.history, saved.step, 'one loss point per step so far: the whole learning curve');
  const everyStep = Array.from({ length: saved.step }, (_, i) => i + 1);
  const chartSteps = await page.evaluate((n) => window.tinygpt.chart.steps.slice(0, n), everyStep.length);
  assert.deepEqual(chartSteps, everyStep, 'the chart is restored from the loss history');
  await waitStep(page, saved.step + 5);
}

test('a checkpoint lands in OPFS and a reload resumes at the saved step with the chart restored', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context);
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.storage), 'opfs');
    const saved = await trainUntilSaved(page, 50);
    const files = await opfsFiles(page);
    assert.ok(files.includes('tinygpt-checkpoints/latest.json'), files.join('\n'));
    for (const name of ['weights.f32', 'adam_m.f32', 'adam_v.f32', 'trainer_state.json', 'loss_history.json']) {
      assert.ok(files.includes(`tinygpt-checkpoints/${saved.id}/${name}`), `${name} in\n${files.join('\n')}`);
    }
    assert.match(await page.textContent('#checkpoint-rows'), new RegExp(saved.id));
    await reloadAndResume(page, saved);
    assert.deepEqual(page.consoleErrors, []);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('with ?storage=idb checkpoints go to IndexedDB and resume the same way', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=idb');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.storage), 'indexeddb');
    const saved = await trainUntilSaved(page, 25);
    const databases = await page.evaluate(async () => (await indexedDB.databases()).map((d) => d.name));
    assert.ok(databases.includes('tinygpt-checkpoints'), databases.join(', '));
    assert.deepEqual((await opfsFiles(page)).filter((f) => f.startsWith('tinygpt-checkpoints/')), [], 'nothing in OPFS');
    await reloadAndResume(page, saved);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});

test('an empty or too-short upload shows the error and keeps the run; download and upload a .safetensors', { timeout: 300_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context);
    const saved = await trainUntilSaved(page, 25);
    const before = await page.evaluate(() => ({
      step: window.tinygpt.state.step,
      dataset: window.tinygpt.state.dataset.name,
      rows: document.querySelectorAll('#checkpoint-rows tr').length,
    }));

    await page.setInputFiles('#file-input', { name: 'empty.txt', mimeType: 'text/plain', buffer: Buffer.alloc(0) });
    const empty = page.locator('.notice[data-code="emptyDataset"]');
    await empty.waitFor();
    assert.match(await empty.textContent(), /empty/i);
    assert.match(await empty.textContent(), /current run and saved checkpoints are unchanged/);
    assert.match(await page.textContent('#dataset-name'), /tinyshakespeare\.txt/, 'the earlier dataset stays');

    await page.setInputFiles('#file-input', { name: 'short.txt', mimeType: 'text/plain', buffer: Buffer.from('to be or not to be') });
    await page.waitForFunction(() => window.tinygpt.state.dataset.name === 'short.txt');
    await page.click('#train');
    const short = page.locator('.notice[data-code="datasetTooShort"]');
    await short.waitFor();
    assert.match(await short.textContent(), /too short/i);
    const after = await page.evaluate(() => ({
      step: window.tinygpt.state.step,
      run: window.tinygpt.state.run.dataset.name,
      state: window.tinygpt.state.runState,
      rows: document.querySelectorAll('#checkpoint-rows tr').length,
    }));
    assert.deepEqual(after, { step: before.step, run: 'tinyshakespeare.txt', state: 'paused', rows: before.rows });

    // Download the checkpoint as .safetensors, then upload it back as a new checkpoint.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`#checkpoint-rows tr[data-id="${saved.id}"] button:has-text("Download")`),
    ]);
    assert.equal(download.suggestedFilename(), `tinygpt-tiny-step${saved.step}.safetensors`);
    const path = await download.path();
    const bytes = readFileSync(path);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'));
    assert.ok(header.token_embedding && header.__metadata__['model_config.json'], 'a TinyGPT safetensors file');
    const savedBefore = await page.evaluate(() => window.tinygpt.state.lastSaved.id);
    await page.setInputFiles('#upload-ckpt', path);
    await page.waitForFunction((id) => window.tinygpt.state.lastSaved.id !== id, savedBefore);
    await page.waitForFunction((n) => document.querySelectorAll('#checkpoint-rows tr').length > n, before.rows);
    const rows = await page.evaluate(() => [...document.querySelectorAll('#checkpoint-rows tr')].map((r) => r.dataset.id));
    assert.equal(rows.length, before.rows + 1, `rows: ${rows}`);

    // Delete the older one (the latest cannot be deleted: its button is disabled).
    assert.equal(await page.isDisabled(`#checkpoint-rows tr[data-id="${rows[0]}"] button:has-text("Delete")`), true);
    page.once('dialog', (dialog) => dialog.accept());
    await page.click(`#checkpoint-rows tr[data-id="${rows[1]}"] button:has-text("Delete")`);
    await page.waitForFunction((n) => document.querySelectorAll('#checkpoint-rows tr').length === n, before.rows);
    const left = await page.evaluate(() => [...document.querySelectorAll('#checkpoint-rows tr')].map((r) => r.dataset.id));
    assert.deepEqual(left, rows.filter((id) => id !== rows[1]));
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});
