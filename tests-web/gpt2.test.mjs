// A Hugging Face GPT-2 model as the LoRA base in a real browser (issue 37's page flow): the
// page fetches ckpt's small GPT-2 folder by URL from the test server (progress shown), an
// adapter trains a few steps on Rust source in the base's BPE tokens, is saved, the page is
// reloaded, the base comes from the browser's copy (the server sees no second request for
// it), the adapter is loaded and both samples are decoded BPE text. The adapter trains on the
// Context field's window (64 tokens of the fixture's 128), which the page remembers and the
// saved adapter records. On the SIMD WASM build and on WebGPU (SwiftShader). The kept copy is
// listed with its size and deleted from the LoRA card, after which the next load downloads
// it again; a download cut short while it was written is listed as incomplete and deleted
// there too. And the misuse: a folder that is not there is named, and the page still loads a
// good one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { BASE_URL, openBrowser, openPage, waitReady, WEBGPU_FLAGS } from './harness.mjs';

const TEXT = 'tests-web/fixtures/lora-text.rs.txt';
/** Where the test server serves ckpt/tests/fixtures/hf_gpt2 (xtask/src/web_test.rs). */
const FOLDER = '/fixtures/hf_gpt2/';
const FILES = ['config.json', 'vocab.json', 'merges.txt', 'model.safetensors'];

/** The test server's request counts for the fixture's files, by path. */
async function requests() {
  const response = await fetch(new URL('__requests', BASE_URL));
  return response.json();
}

/** How often the test server was asked for one of the fixture's files, in `counts`. */
const counted = (counts, file) => counts[`${FOLDER}${file}`] ?? 0;

/** Loads the GPT-2 base from `url` (the field keeps it across reloads); its info and progress. */
async function loadBase(page, url) {
  await page.selectOption('#lora-base-source', 'url');
  if (url) await page.fill('#lora-base-url', url);
  await page.evaluate(() => (window.tinygpt.lora.state.base = null));
  await page.click('#lora-load-base');
  await page.waitForFunction(() => window.tinygpt.lora.state.base?.source === 'url', null, { timeout: 60_000 });
  return page.evaluate(() => ({ base: window.tinygpt.lora.state.base, downloads: window.tinygpt.lora.state.downloads }));
}

/**
 * In the page: writes the OPFS group of the download of `url` cut short while written (the
 * worker's `started.json` marker and a 2000-byte `config.json`, no pointer) and returns how
 * many groups the bases store holds; with `url` null, only counts them.
 */
async function plantCutShort(url) {
  const top = await navigator.storage.getDirectory();
  const store = await top.getDirectoryHandle('tinygpt-bases', { create: true });
  if (url) {
    const sha = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(url)));
    const hex = [...sha].map((b) => b.toString(16).padStart(2, '0')).join('');
    const group = await store.getDirectoryHandle(`url-${hex.slice(0, 32)}`, { create: true });
    const files = { 'started.json': JSON.stringify({ url, started_ms: Date.now() }), 'config.json': '{}'.padEnd(2000) };
    for (const [name, text] of Object.entries(files)) {
      const writable = await (await group.getFileHandle(name, { create: true })).createWritable();
      await writable.write(text);
      await writable.close();
    }
  }
  let groups = 0;
  for await (const entry of store.values()) groups += entry.kind === 'directory' ? 1 : 0;
  return groups;
}

/** Samples the base alone and base + adapter (greedy, `length` tokens) with "Sample both". */
async function compare(page, length) {
  await page.fill('#prompt', 'fn main');
  await page.fill('#temperature', '0');
  await page.fill('#length', String(length));
  await page.fill('#seed', '1');
  await page.waitForFunction(() => !document.getElementById('lora-compare').disabled);
  await page.click('#lora-compare');
  await page.waitForFunction(() => window.tinygpt.lora.state.samples.adapter != null, null, { timeout: 120_000 });
  return page.evaluate(() => window.tinygpt.lora.state.samples);
}

async function flow(browser, query, label) {
  const page = await openPage(browser.context, query);
  const before = await requests();
  await page.setInputFiles('#file-input', TEXT);
  await page.waitForFunction(() => window.tinygpt.state.dataset?.name === 'lora-text.rs.txt');

  const { base, downloads } = await loadBase(page, FOLDER);
  assert.equal(base.modelConfig.vocab_size, 1000);
  assert.match(base.modelConfig.tokenizer, /^bpe-/);
  for (const file of FILES) {
    const mine = downloads.filter((d) => d.file === file);
    assert.ok(mine.length >= 2 && mine.every((d) => !d.cached), `${file} downloaded with progress: ${JSON.stringify(mine)}`);
    assert.equal(mine.at(-1).bytesDone, mine.at(-1).bytesTotal, `${file} complete`);
  }
  assert.ok(
    downloads.some((d) => d.file === 'model.safetensors' && d.bytesDone > 0 && d.bytesDone < d.bytesTotal),
    'progress part-way through the weights',
  );
  assert.match(await page.textContent('#lora-download-line'), /model\.safetensors/);
  const fetched = await requests();
  for (const file of FILES) assert.equal(counted(fetched, file) - counted(before, file), 1, `${file} fetched once`);

  await page.fill('#lora-name', 'gpt2-code');
  await page.selectOption('#lora-preset', 'qv-r4');
  await page.fill('#lora-steps', '4');
  await page.fill('#lora-lr', '0.05');
  await page.fill('#lora-batch', '2');
  await page.fill('#lora-seed', '1');
  // A window longer than the base's context (128) is refused in the page, naming the range.
  await page.fill('#lora-context', '1000');
  await page.click('#lora-train');
  const refused = page.locator('.notice[data-code="invalidConfig"]');
  await refused.waitFor({ timeout: 10_000 });
  assert.match(await refused.textContent(), /1 to 128/);
  assert.equal(await page.evaluate(() => window.tinygpt.state.run?.adapter ?? null), null, 'nothing started');
  await page.fill('#lora-context', '64');
  await page.click('#lora-train');
  await page.waitForFunction(() => window.tinygpt.state.run?.adapter, null, { timeout: 60_000 });
  const run = await page.evaluate(() => window.tinygpt.state.run);
  assert.equal(run.modelConfig.context_length, 64, "the run trains on the Context field's window");
  assert.match(run.dataset.tokenizer, /^bpe-/, 'the text is read in the base tokens');
  assert.ok(run.dataset.token_count < run.dataset.raw_bytes, `${run.dataset.token_count} tokens of ${run.dataset.raw_bytes} bytes`);
  await page.waitForFunction(() => window.tinygpt.state.runState === 'finished', null, { timeout: 240_000 });
  await page.waitForFunction(() => window.tinygpt.messages.includes('adapterSaved'), null, { timeout: 60_000 });

  await page.reload();
  await waitReady(page);
  assert.equal(await page.inputValue('#lora-base-url'), FOLDER, 'the page remembers the URL');
  assert.equal(await page.inputValue('#lora-context'), '64', 'and the context');
  const again = await loadBase(page, null);
  assert.equal(again.base.weightsSha256, base.weightsSha256);
  assert.ok(again.downloads.length >= 4 && again.downloads.every((d) => d.cached), JSON.stringify(again.downloads));
  assert.match(await page.textContent('#lora-download-line'), /read from this browser's copy/);
  const after = await requests();
  for (const file of FILES) assert.equal(counted(after, file), counted(fetched, file), `${file} not fetched again`);

  await page.waitForFunction(() => window.tinygpt.lora.state.adapters.some((a) => a.name === 'gpt2-code' && a.fitsBase), null, {
    timeout: 30_000,
  });
  const saved = await page.evaluate(() => window.tinygpt.lora.state.adapters.find((a) => a.name === 'gpt2-code'));
  assert.equal(saved.context, 64, 'the saved adapter records its window');
  assert.match(await page.textContent('#adapter-rows tr[data-name="gpt2-code"]'), /windows of 64 tokens/);
  await page.click('#adapter-rows tr[data-name="gpt2-code"] button.adapter-use');
  await page.waitForFunction(() => window.tinygpt.lora.state.selected === 'gpt2-code');
  const samples = await compare(page, 16);
  // The random base's 16 greedy tokens are multi-byte BPE tokens; the adapter changes them.
  assert.ok(samples.base.length > 16, `BPE tokens decoded to their text: ${JSON.stringify(samples.base)}`);
  assert.notEqual(samples.adapter, samples.base, 'the adapter changes what the model writes');
  for (const which of ['base', 'adapter']) {
    assert.ok(!samples[which].includes('\uFFFD'), `${which} decodes whole characters: ${JSON.stringify(samples[which])}`);
  }
  console.log(`gpt2 ${label}: base ${JSON.stringify(samples.base)} / adapter ${JSON.stringify(samples.adapter)}`);
  assert.deepEqual(page.pageErrors, []);
  assert.deepEqual(page.consoleErrors, []);
}

test('GPT-2 base on WASM (SIMD): by URL with progress → adapter on Rust text in BPE → saved → reload reads the cached base → samples', { timeout: 360_000 }, async () => {
  const browser = await openBrowser();
  try {
    await flow(browser, '?backend=wasm-simd', 'wasm-simd');
  } finally {
    await browser.close();
  }
});

test('GPT-2 base on WebGPU (SwiftShader): the same flow', { timeout: 360_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?backend=webgpu');
    assert.equal(await page.evaluate(() => window.tinygpt.state.capabilities.backend), 'webgpu');
    await flow(browser, '?backend=webgpu', 'webgpu');
  } finally {
    await browser.close();
  }
});

test('GPT-2 base kept in the browser: listed with its size in the LoRA card, deleted there, downloaded again by the next load', { timeout: 180_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?backend=wasm-simd');
    await loadBase(page, FOLDER);
    await page.waitForFunction(() => window.tinygpt.lora.state.bases.length === 1, null, { timeout: 30_000 });
    const [kept] = await page.evaluate(() => window.tinygpt.lora.state.bases);
    assert.equal(kept.url, new URL(FOLDER, BASE_URL).href);
    const files = FILES.reduce((n, f) => n + statSync(`ckpt/tests/fixtures/hf_gpt2/${f}`).size, 0);
    assert.ok(kept.bytes >= files && kept.bytes < files + 4096, `${kept.bytes} bytes kept for ${files} bytes of files`);
    assert.ok(Math.abs(kept.fetchedMs - Date.now()) < 600_000, `fetched just now: ${kept.fetchedMs}`);
    const row = page.locator(`#base-rows tr[data-url="${kept.url}"]`);
    assert.match(await row.textContent(), /\d+(\.\d)? (KB|MB)/);

    const before = await requests();
    page.once('dialog', (dialog) => dialog.accept());
    await row.locator('button.base-delete').click();
    await page.waitForFunction(() => window.tinygpt.lora.state.bases.length === 0, null, { timeout: 30_000 });
    assert.match(await page.textContent('#base-rows'), /No downloaded models/);
    assert.match(await page.textContent('#notices'), /removed/);
    // The loaded base stays loaded; loading it again downloads every file again.
    const { downloads } = await loadBase(page, null);
    assert.ok(downloads.length >= 4 && downloads.every((d) => !d.cached), JSON.stringify(downloads));
    const after = await requests();
    for (const file of FILES) assert.equal(counted(after, file) - counted(before, file), 1, `${file} downloaded again`);
    await page.waitForFunction(() => window.tinygpt.lora.state.bases.length === 1, null, { timeout: 30_000 });
    assert.equal((await page.evaluate(() => window.tinygpt.lora.state.bases))[0].complete, true);
    assert.doesNotMatch(await row.textContent(), /incomplete/);

    // A download whose write was cut short (the tab closed): its marker and a file, as the
    // worker writes them in OPFS, are listed as an incomplete download with their size and
    // deleted with the same button.
    const cut = new URL('/fixtures/cut-short/', BASE_URL).href;
    await page.evaluate(plantCutShort, cut);
    await page.evaluate(() => window.tinygpt.client.send({ type: 'listBases' }));
    await page.waitForFunction(() => window.tinygpt.lora.state.bases.length === 2, null, { timeout: 30_000 });
    const incomplete = (await page.evaluate(() => window.tinygpt.lora.state.bases)).find((b) => b.url === cut);
    assert.equal(incomplete?.complete, false, JSON.stringify(incomplete));
    assert.ok(incomplete.bytes >= 2000 && incomplete.bytes < 2200, `${incomplete.bytes} bytes`);
    const cutRow = page.locator(`#base-rows tr[data-url="${cut}"]`);
    assert.match(await cutRow.textContent(), /incomplete download/);
    assert.match(await cutRow.textContent(), /\d+(\.\d)? KB/);
    page.once('dialog', (dialog) => dialog.accept());
    await cutRow.locator('button.base-delete').click();
    await page.waitForFunction(() => window.tinygpt.lora.state.bases.length === 1, null, { timeout: 30_000 });
    assert.equal(await page.evaluate(plantCutShort, null), 1, 'only the complete copy is left in OPFS');
    assert.deepEqual(page.pageErrors, []);
    assert.deepEqual(page.consoleErrors, []);
  } finally {
    await browser.close();
  }
});

test('GPT-2 base misuse: a folder that is not there is named (404), and the page then loads a good one', { timeout: 120_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?backend=wasm-simd');
    const error = page.evaluate(
      () => new Promise((resolve) => window.tinygpt.client.on('error', (m) => resolve({ code: m.code, message: m.message }))),
    );
    await page.selectOption('#lora-base-source', 'url');
    await page.fill('#lora-base-url', '/fixtures/no-such-model/');
    await page.click('#lora-load-base');
    const { code, message } = await error;
    assert.equal(code, 'downloadFailed', message);
    assert.match(message, /config\.json/);
    assert.match(message, /HTTP 404/);
    assert.match(message, /fixtures\/no-such-model\/config\.json/);
    const { base } = await loadBase(page, FOLDER);
    assert.equal(base.modelConfig.vocab_size, 1000);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});
