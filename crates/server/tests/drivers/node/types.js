'use strict';
// node-postgres type paths (issue 17 item 6): JavaScript Date parameters and
// results (timestamp, timestamptz, date) with the process in a non-UTC zone
// (TZ=America/New_York) and the session in another (Europe/Berlin), plus
// numeric, uuid and interval; parsed by pg's type parsers and as raw text.
// client.js calls typePaths().

const TABLE = 'drv_node_types';

const RAW = { getTypeParser: () => (value) => value };

async function typePaths(client, out, render) {
  const saved = process.env.TZ;
  // Node re-reads TZ when it is assigned: Dates are local to New York now.
  process.env.TZ = 'America/New_York';
  try {
    await client.query(`DROP TABLE IF EXISTS ${TABLE}`);
    await client.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, d date, ts timestamp, tstz timestamptz, n numeric(20,6), u uuid, iv interval)`);
    await client.query("SET TIME ZONE 'Europe/Berlin'");
    out(`types: process zone offset ${new Date(2024, 0, 1).getTimezoneOffset()}, session zone ${(await client.query('SHOW TimeZone')).rows[0].TimeZone}`);
    const rows = [
      [1, new Date(2024, 1, 29), new Date(2024, 2, 10, 2, 30, 15, 123), new Date(Date.UTC(2024, 9, 27, 0, 30, 0, 500)),
        '12345.678901', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '1 day 02:00:00.000005'],
      [2, '1970-01-01', '1999-12-31 23:59:59.999999', new Date(2024, 10, 3, 1, 30), '-0.000001',
        '00000000-0000-0000-0000-000000000000', '-3 days +01:00:00'],
      [3, new Date(2024, 6, 4, 23, 59, 59, 999), '2024-03-31 02:30:00', '2024-03-31 02:30:00', '0', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', '1 mon'],
      [4, null, null, null, null, null, null],
    ];
    const insert = `INSERT INTO ${TABLE} VALUES ($1, $2, $3, $4, $5, $6, $7)`;
    for (const row of rows) {
      await client.query(insert, row);
    }
    await client.query({ name: 'drv_node_types_insert', text: insert, values: [10, ...rows[0].slice(1)] });
    const select = `SELECT id, d, ts, tstz, n, u, iv FROM ${TABLE} ORDER BY id`;
    for (const row of (await client.query({ text: select, rowMode: 'array' })).rows) {
      out(`types parsed row: ${row.map((v) => (v !== null && typeof v === 'object' && !(v instanceof Date) ? 'object:' + JSON.stringify(v) : render(v))).join('|')}`);
    }
    for (const row of (await client.query({ text: select, rowMode: 'array', types: RAW })).rows) {
      out(`types raw row: ${row.map((v) => JSON.stringify(v)).join('|')}`);
    }
    const checks = [['d', rows[0][1]], ['ts', rows[0][2]], ['tstz', rows[0][3]], ['tstz', new Date(Date.UTC(2024, 10, 3, 6, 30))],
      ['n', rows[0][4]], ['u', rows[0][5]], ['iv', rows[0][6]]];
    for (const [column, value] of checks) {
      const r = await client.query({ text: `SELECT coalesce(array_agg(id ORDER BY id)::text, 'none') AS ids FROM ${TABLE} WHERE ${column} = $1`, values: [value] });
      out(`types where ${column}: ${r.rows[0].ids}`);
    }
    const r = await client.query({
      text: "SELECT $1::timestamptz + interval '1 day' AS a, ($1::timestamptz + interval '1 day')::text AS b, $2::date AS c, $2::timestamptz::date::text AS d",
      values: [new Date(Date.UTC(2024, 2, 30, 11)), new Date(2024, 11, 31, 22)],
    });
    out(`types arithmetic: ${render(r.rows[0].a)}|${r.rows[0].b}|${render(r.rows[0].c)}|${r.rows[0].d}`);
    await client.query(`DROP TABLE ${TABLE}`);
    await client.query("SET TIME ZONE 'UTC'");
    out('types: done');
  } finally {
    process.env.TZ = saved;
  }
}

module.exports = { typePaths };
