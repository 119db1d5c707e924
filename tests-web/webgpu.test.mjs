// WebGPU in the worker: what the capability panel says with and without an adapter, and
// the one-line reason when training falls back to WebAssembly. Run by `cargo xtask test-web`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WEBGPU_FLAGS, openBrowser, openPage } from './harness.mjs';

test('with WebGPU enabled the capability panel shows the adapter, that it is a fallback adapter, and its limits', { timeout: 120_000 }, async () => {
  const browser = await openBrowser({ args: WEBGPU_FLAGS });
  try {
    const page = await openPage(browser.context, '?storage=memory');
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.ok(caps.webgpu, `an adapter is reported: ${JSON.stringify(caps)}`);
    assert.ok(caps.webgpu.adapter.length > 0, 'the adapter has a name');
    assert.equal(caps.webgpu.fallbackAdapter, true, 'SwiftShader is a fallback (software) adapter');
    assert.ok(caps.webgpu.limits.maxStorageBufferBindingSize >= 128 * 2 ** 20, JSON.stringify(caps.webgpu.limits));
    assert.ok(caps.webgpu.limits.maxComputeWorkgroupSizeX >= 256);
    const panel = await page.textContent('#cap-webgpu');
    assert.match(panel, /fallback adapter/);
    assert.match(panel, /max storage binding/);
    assert.match(panel, new RegExp(caps.webgpu.adapter.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    // Until the WebGPU kernels are in the build, training runs on the best WASM build and
    // says why in one line.
    assert.equal(caps.backend, 'wasm-simd');
    assert.ok(caps.backendNote && !caps.backendNote.includes('\n'), `one-line reason: ${caps.backendNote}`);
    assert.match(await page.textContent('#cap-backend'), /^wasm-simd — /);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});

test('without WebGPU the worker falls back to WASM and the panel gives the reason', { timeout: 120_000 }, async () => {
  const browser = await openBrowser();
  try {
    const page = await openPage(browser.context, '?storage=memory');
    const caps = await page.evaluate(() => window.tinygpt.state.capabilities);
    assert.equal(caps.webgpu, undefined, 'no adapter without --enable-unsafe-webgpu');
    assert.equal(caps.backend, 'wasm-simd');
    assert.match(caps.backendNote, /WebGPU/);
    assert.ok(!caps.backendNote.includes('\n'), 'one line');
    assert.match(await page.textContent('#cap-webgpu'), /^no — /);
    assert.equal(await page.textContent('#cap-backend'), `wasm-simd — ${caps.backendNote}`);
    assert.deepEqual(page.pageErrors, []);
  } finally {
    await browser.close();
  }
});
