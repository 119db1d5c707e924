// The GPT-2 folders the worker keeps in browser storage after a load by URL: one row per
// folder with its size, when it was downloaded, and a delete button (`deleteBase`).

import { formatBytes } from './format.js';

export function renderBases(tbody, items, { onDelete }) {
  if (!items.length) {
    const row = document.createElement('tr');
    row.className = 'empty';
    row.innerHTML = '<td colspan="4">No downloaded models.</td>';
    tbody.replaceChildren(row);
    return;
  }
  tbody.replaceChildren(
    ...items.map((item) => {
      const row = document.createElement('tr');
      row.dataset.url = item.url;
      const when = item.fetchedMs == null ? '—' : new Date(item.fetchedMs).toLocaleString();
      for (const text of [item.url, formatBytes(item.bytes), when]) {
        const td = document.createElement('td');
        td.textContent = text;
        row.append(td);
      }
      const actions = document.createElement('td');
      const del = document.createElement('button');
      del.textContent = 'Delete';
      del.className = 'danger base-delete';
      del.title = 'Remove the downloaded copy from this browser; loading it again downloads it. A loaded model stays loaded.';
      del.onclick = () => onDelete(item);
      actions.append(del);
      row.append(actions);
      return row;
    }),
  );
}
