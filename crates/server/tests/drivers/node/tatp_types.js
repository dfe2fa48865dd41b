// The TATP-like table with uuid, jsonb and interval columns through
// node-postgres: node-postgres has no COPY, so the rows of tatp_ext.tsv are
// inserted with parameters (the COPY loads run in the other drivers), then
// read back as the exact text the server sent and with node's parsed types.
'use strict';
const fs = require('fs');
const path = require('path');

const COLUMNS = 's_id integer PRIMARY KEY, sub_uuid uuid NOT NULL UNIQUE, profile jsonb, ' +
  'call_window interval, last_seen timestamptz, balance numeric(12,2), vlr_location bigint';

function copyField(f) {
  if (f === '\\N') return null;
  return f.replace(/\\(.)/g, (_, c) => ({ t: '\t', n: '\n', '\\': '\\' }[c] || c));
}

async function run(client, out) {
  const table = 'tatp_ext_node';
  await client.query(`CREATE TABLE ${table} (${COLUMNS})`);
  const lines = fs.readFileSync(path.join(__dirname, '..', 'tatp_ext.tsv'), 'utf8').split('\n').filter((l) => l);
  for (const line of lines) {
    const fields = line.split('\t').map(copyField);
    await client.query(`INSERT INTO ${table} VALUES ($1, $2, $3, $4, $5, $6, $7)`, fields);
  }
  out(`tatp inserted: ${lines.length}`);
  const raw = await client.query({ text: `SELECT * FROM ${table} ORDER BY s_id`, types: { getTypeParser: () => (v) => v } });
  for (const row of raw.rows) out('tatp text: ' + raw.fields.map((f) => (row[f.name] === null ? 'NULL' : row[f.name])).join('|'));
  const parsed = await client.query(`SELECT * FROM ${table} ORDER BY s_id`);
  for (const row of parsed.rows) {
    out('tatp parsed: ' + parsed.fields.map((f) => {
      const v = row[f.name];
      if (v === null) return 'NULL';
      if (v instanceof Date) return 'date:' + v.toISOString();
      if (typeof v === 'object') return 'obj:' + JSON.stringify(v);
      return typeof v + ':' + v;
    }).join('|'));
  }
  const filtered = await client.query(`SELECT s_id FROM ${table} WHERE profile ->> 'name' = $1 OR profile @> $2 ORDER BY s_id`, ['sub 7', '{"active": true, "tier": 2}']);
  out('tatp filtered: ' + filtered.rows.map((r) => r.s_id).join(','));
  await client.query(`DROP TABLE ${table}`);
}

module.exports = { run };
