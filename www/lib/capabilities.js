// The capability panel: what this browser offers the worker.

import { formatBytes } from './format.js';

const yesNo = (el, value, yes = 'yes', no = 'no', noClass = 'no') => {
  el.textContent = value ? yes : no;
  el.className = value ? 'yes' : noClass;
};

/** What a precision's matmul path is called on the panel. */
const KERNELS = { f32: 'f32 matmuls', 'shader-f16': 'f16 matmuls (shader-f16)', 'cooperative-matrix': 'tensor-core matmuls (cooperative matrix)' };

/**
 * The WebGPU row in one line: which device, whether it is a software fallback, whether
 * training runs on it (and why not), and what `mixed` precision's matmuls run there and why.
 */
export function webgpuLine(caps) {
  const gpu = caps.webgpu;
  if (!gpu) return `no — ${(caps.backendNote || 'no adapter').split(':')[0]}`;
  const device = `${gpu.adapter || 'unnamed adapter'}${gpu.fallbackAdapter ? ' (software fallback)' : ''}`;
  if (caps.backend !== 'webgpu') return `${device} · not used: ${caps.backend} runs (${caps.backendNote})`;
  const m = caps.mixedMatmul;
  const mixed = m ? ` · mixed precision runs ${KERNELS[m.kernels] || m.kernels}: ${m.reason}` : '';
  return `${device} · training runs here${mixed}`;
}

export function renderCapabilities(caps, persisted) {
  const $ = (id) => document.getElementById(id);
  // The engine once, with the reason when it is not WebGPU (the note never repeats the name).
  $('cap-backend').textContent = caps.backendNote ? `${caps.backend} — ${caps.backendNote}` : caps.backend;
  $('cap-webgpu').textContent = webgpuLine(caps);
  $('cap-webgpu').className = !caps.webgpu ? 'no' : caps.backend === 'webgpu' ? 'yes' : '';
  const gpu = caps.webgpu;
  $('cap-webgpu-details').hidden = !gpu;
  if (gpu) {
    const l = gpu.limits;
    $('cap-webgpu-more').textContent =
      `Limits: max storage binding ${formatBytes(l.maxStorageBufferBindingSize)}, max buffer ` +
      `${formatBytes(l.maxBufferSize)}, workgroup ${l.maxComputeWorkgroupSizeX} ` +
      `(${l.maxComputeInvocationsPerWorkgroup} invocations, ${formatBytes(l.maxComputeWorkgroupStorageSize)} shared), ` +
      `${l.maxStorageBuffersPerShaderStage} storage buffers a stage. ` +
      `Features: ${gpu.features.length ? gpu.features.join(', ') : 'none'}.`;
  }
  yesNo($('cap-simd'), caps.simd);
  yesNo($('cap-relaxed-simd'), caps.relaxedSimd);
  yesNo($('cap-isolated'), caps.crossOriginIsolated);
  const storage = { opfs: 'OPFS', indexeddb: 'IndexedDB', memory: 'memory (this tab only)', none: 'unavailable' }[caps.storage];
  $('cap-storage').textContent = caps.storageNote ? `${storage} — ${caps.storageNote}` : storage;
  $('cap-storage').className = caps.storage === 'none' ? 'no' : '';
  yesNo($('cap-persisted'), persisted, 'yes', 'no (the browser may evict it under pressure)', 'warn');
  $('cap-quota').textContent =
    caps.quotaBytes != null ? `${formatBytes(caps.usageBytes)} used of ${formatBytes(caps.quotaBytes)}` : 'unknown';
  // Developer mode lives in the address (`?checked`): the worker chooses its engine once.
  const address = new URL(location.href);
  if (caps.checked) address.searchParams.delete('checked');
  else address.searchParams.set('checked', '');
  $('cap-checked').textContent = caps.checked ? 'on: every op checked (kernels-checked)' : 'off';
  $('cap-checked').className = caps.checked ? 'warn' : '';
  $('cap-checked-toggle').textContent = caps.checked ? 'turn off' : 'check every op (finds the op that makes a NaN; slow)';
  $('cap-checked-toggle').href = address.href;
  $('cap-threads').textContent =
    caps.threads != null ? `threads: ${caps.threads} (of ${caps.hardwareThreads} hardware threads)` : `1 (of ${caps.hardwareThreads} hardware threads)`;
}
