// The page's tables of kept things (checkpoints, adapters, downloaded models): one row per
// item, or, when there are none, one muted row saying so across the table's columns (the
// `.ckpt-table tr.empty` style), so every list shows "none" the same way.

/**
 * Fills `tbody` with `row(item, i)` for each of `items`, or with one `empty` row of
 * `columns` cells' width when there are none.
 * @template T
 * @param {HTMLElement} tbody
 * @param {T[]} items
 * @param {{ empty: string, columns: number }} none
 * @param {(item: T, i: number) => HTMLTableRowElement} row
 */
export function renderRows(tbody, items, { empty, columns }, row) {
  if (items.length) {
    tbody.replaceChildren(...items.map(row));
    return;
  }
  const tr = document.createElement('tr');
  tr.className = 'empty';
  const td = document.createElement('td');
  td.colSpan = columns;
  td.textContent = empty;
  tr.append(td);
  tbody.replaceChildren(tr);
}
