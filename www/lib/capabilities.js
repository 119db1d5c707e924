// The capability panel: what this browser offers the worker.

import { formatBytes } from './format.js';

const yesNo = (el, value, yes = 'yes', no = 'no', noClass = 'no') => {
  el.textContent = value ? yes : no;
  el.className = value ? 'yes' : noClass;
};

export function renderCapabilities(caps, persisted) {
  const $ = (id) => document.getElementById(id);
  $('cap-backend').textContent = caps.backendNote ? `${caps.backend} — ${caps.backendNote}` : caps.backend;
  const gpu = caps.webgpu;
  if (gpu) {
    const l = gpu.limits;
    $('cap-webgpu').textContent =
      `${gpu.adapter}${gpu.fallbackAdapter ? ' (fallback adapter)' : ''} — max storage binding ` +
      `${formatBytes(l.maxStorageBufferBindingSize)}, workgroup ${l.maxComputeWorkgroupSizeX} ` +
      `(${l.maxComputeInvocationsPerWorkgroup} invocations, ${formatBytes(l.maxComputeWorkgroupStorageSize)} shared), ` +
      `${l.maxStorageBuffersPerShaderStage} storage buffers a stage` +
      (gpu.features.length ? `; ${gpu.features.join(', ')}` : '');
    $('cap-webgpu').className = gpu.fallbackAdapter ? 'warn' : 'yes';
  } else {
    $('cap-webgpu').textContent = `no — ${(caps.backendNote || '').split(':')[0]}`;
    $('cap-webgpu').className = 'no';
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
