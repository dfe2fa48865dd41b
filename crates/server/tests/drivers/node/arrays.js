'use strict';
// Arrays through node-postgres: JavaScript arrays as parameters (pg sends
// them in PostgreSQL's text form), `= ANY($1)`, NULL elements and quoting,
// and the arrays pg parses back from the text results, per element type.

module.exports = async function arrays(client, out) {
  const render = (v) => JSON.stringify(v);
  await client.query('DROP TABLE IF EXISTS drv_node_arrays');
  await client.query('CREATE TABLE drv_node_arrays (id int PRIMARY KEY, ids int4[], names text[], bigs int8[], days date[], flags bool[])');
  const rows = [
    [1, [1, 2, null], ['a', 'b c', '', 'NULL', null, 'q"\\', '{x}'], ['9007199254740993'], ['2024-02-29'], [true, false]],
    [2, [], [], [], [], []],
    [3, null, ['z'], null, null, null],
  ];
  for (const row of rows) {
    await client.query({ name: 'drv_node_arrays_insert', text: 'INSERT INTO drv_node_arrays VALUES ($1, $2, $3, $4, $5, $6)', values: row });
  }
  const all = await client.query('SELECT id, ids, names, bigs, flags, days::text[] FROM drv_node_arrays ORDER BY id');
  for (const row of all.rows) out(`arrays row: ${render(row)}`);
  for (const ids of [[3, 1, 99], [], [2]]) {
    const found = await client.query('SELECT id FROM drv_node_arrays WHERE id = ANY($1) ORDER BY id', [ids]);
    out(`arrays any ${render(ids)} -> ${render(found.rows.map((r) => r.id))}`);
  }
  const typed = await client.query({ text: 'SELECT $1::int[] AS a, $2::text[] AS b, ARRAY[1, NULL] AS c, array_agg(id ORDER BY id) AS d FROM drv_node_arrays', values: [[4, 5], ['p q', null]] });
  out(`arrays typed: ${render(typed.rows)} types=${typed.fields.map((f) => f.dataTypeID).join(',')}`);
  const raw = await client.query({ text: 'SELECT names, ids FROM drv_node_arrays WHERE id = 1', rowMode: 'array', types: { getTypeParser: () => (value) => value } });
  out(`arrays raw text: ${render(raw.rows)}`);
  await client.query('DROP TABLE drv_node_arrays');
};
