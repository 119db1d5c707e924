// The capability panel: what this browser offers the worker.

import { formatBytes } from './format.js';

const yesNo = (el, value, yes = 'yes', no = 'no', noClass = 'no') => {
  el.textContent = value ? yes : no;
  el.className = value ? 'yes' : noClass;
};

export function renderCapabilities(caps, persisted) {
  const $ = (id) => document.getElementById(id);
  $('cap-backend').textContent = caps.backend;
  yesNo($('cap-simd'), caps.simd);
  yesNo($('cap-isolated'), caps.crossOriginIsolated);
  const storage = { opfs: 'OPFS', indexeddb: 'IndexedDB', memory: 'memory (this tab only)', none: 'unavailable' }[caps.storage];
  $('cap-storage').textContent = caps.storageNote ? `${storage} — ${caps.storageNote}` : storage;
  $('cap-storage').className = caps.storage === 'none' ? 'no' : '';
  yesNo($('cap-persisted'), persisted, 'yes', 'no (the browser may evict it under pressure)', 'warn');
  $('cap-quota').textContent =
    caps.quotaBytes != null ? `${formatBytes(caps.usageBytes)} used of ${formatBytes(caps.quotaBytes)}` : 'unknown';
  $('cap-threads').textContent = String(caps.hardwareThreads);
}
