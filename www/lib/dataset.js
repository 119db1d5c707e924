// Datasets on the page: the bundled TinyShakespeare, uploads and drops, their dataset_id
// (SHA-256 of the raw bytes, as in dataset_manifest.json), and a small IndexedDB cache of
// uploaded texts so "Resume last run" can find the text after a reload.

export const DEFAULT_NAME = 'tinyshakespeare.txt';

export async function datasetId(bytes) {
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

export async function loadDefault() {
  const response = await fetch(new URL('../data/tinyshakespeare.txt', import.meta.url));
  if (!response.ok) throw new Error(`could not load the default dataset (HTTP ${response.status})`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  return { name: DEFAULT_NAME, bytes, id: await datasetId(bytes), builtIn: true };
}

export async function fromFile(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  return { name: file.name, bytes, id: await datasetId(bytes), builtIn: false };
}

/**
 * A copy of the dataset for a message to the worker, and the transfer list that moves the
 * copy's buffer there: the page keeps its own bytes, and the megabyte-sized copy is not
 * cloned a second time on the main thread by `postMessage`.
 */
export function forWorker(dataset) {
  const bytes = dataset.bytes.slice();
  return { dataset: { name: dataset.name, bytes }, transfer: [bytes.buffer] };
}

const DB = 'tinygpt-datasets';
const STORE = 'texts';

function openDb() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Remembers an uploaded text by its id; failures (private windows) are not fatal. */
export async function remember(dataset) {
  try {
    const db = await openDb();
    await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, 'readwrite');
      tx.objectStore(STORE).put({ name: dataset.name, bytes: dataset.bytes }, dataset.id);
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
    });
    db.close();
  } catch (e) {
    console.warn('could not cache the dataset for later resumes:', e);
  }
}

export async function recall(id) {
  try {
    const db = await openDb();
    const value = await new Promise((resolve, reject) => {
      const request = db.transaction(STORE).objectStore(STORE).get(id);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    db.close();
    return value ? { name: value.name, bytes: value.bytes, id, builtIn: false } : null;
  } catch {
    return null;
  }
}
