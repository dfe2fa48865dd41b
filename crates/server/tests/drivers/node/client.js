'use strict';
// node-postgres (`pg`) against a PostgreSQL-compatible server.
//
// Reads results three ways: text with pg's own type parsers, text exactly as
// the server sent it, and binary (`binary: true`) decoded here byte by byte
// (see binaryValue for what pg 8 does to binary fields).
// Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD,
// PGDATABASE. Prints one normalized line per result or error; the transcript
// from PostgreSQL and from pgtier must be equal (crates/server/tests/drivers.rs).

const { Client } = require('pg');
const { typePaths } = require('./types');

const TABLE = 'drv_node';
const COLUMNS = 'id, c_int2, c_int8, c_numeric, c_real, c_double, c_text, c_varchar, c_char, c_bool, c_date, c_ts, c_bytea';

function out(line) {
  process.stdout.write(line + '\n');
}

function env(name) {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

function connect(password) {
  return new Client({
    host: env('PGHOST'),
    port: Number(env('PGPORT')),
    user: env('PGUSER'),
    password,
    database: env('PGDATABASE'),
    connectionTimeoutMillis: 10000,
  });
}

function render(value) {
  if (value === null) return 'NULL';
  if (Buffer.isBuffer(value)) return 'bytes:\\x' + value.toString('hex');
  if (value instanceof Date) return 'Date:' + (isNaN(value) ? 'invalid' : value.toISOString());
  if (typeof value === 'string') return JSON.stringify(value);
  return `${typeof value}:${String(value)}`;
}

// Binary wire formats (PostgreSQL's *send functions), decoded to canonical text.
const POSTGRES_EPOCH_MS = Date.UTC(2000, 0, 1);

function decodeNumeric(buf) {
  const ndigits = buf.readInt16BE(0);
  const weight = buf.readInt16BE(2);
  const sign = buf.readUInt16BE(4);
  const dscale = buf.readInt16BE(6);
  if (sign === 0xc000) return 'NaN';
  if (sign === 0xd000) return 'Infinity';
  if (sign === 0xf000) return '-Infinity';
  let intPart = '';
  let fracPart = '';
  for (let i = 0; i < ndigits; i++) {
    const group = String(buf.readInt16BE(8 + 2 * i)).padStart(4, '0');
    if (i <= weight) intPart += group;
    else fracPart += group;
  }
  if (weight >= ndigits) intPart += '0000'.repeat(weight - ndigits + 1);
  if (weight < -1) fracPart = '0000'.repeat(-weight - 1) + fracPart;
  intPart = intPart.replace(/^0+/, '') || '0';
  fracPart = fracPart.padEnd(dscale, '0').slice(0, dscale);
  const text = dscale > 0 ? `${intPart}.${fracPart}` : intPart;
  return (sign === 0x4000 ? '-' : '') + text + `(ndigits=${ndigits},weight=${weight},dscale=${dscale})`;
}

function decodeBinary(oid, buf) {
  switch (oid) {
    case 16: return `bool:${buf.length === 1 ? buf[0] : 'len' + buf.length}`;
    case 17: return 'bytea:\\x' + buf.toString('hex');
    case 20: return `int8:${buf.readBigInt64BE(0)}`;
    case 21: return `int2:${buf.readInt16BE(0)}`;
    case 23: return `int4:${buf.readInt32BE(0)}`;
    case 25: case 1043: case 1042: return `text:${JSON.stringify(buf.toString('utf8'))}`;
    case 700: return `float4:${buf.readFloatBE(0)}(${buf.toString('hex')})`;
    case 701: return `float8:${buf.readDoubleBE(0)}(${buf.toString('hex')})`;
    case 1082: {
      const days = buf.readInt32BE(0);
      return `date:${new Date(POSTGRES_EPOCH_MS + days * 86400000).toISOString().slice(0, 10)}(${days})`;
    }
    case 1114: {
      const micros = buf.readBigInt64BE(0);
      const ms = Number(micros / 1000n);
      const rest = String(Number(((micros % 1000000n) + 1000000n) % 1000000n)).padStart(6, '0');
      return `timestamp:${new Date(POSTGRES_EPOCH_MS + ms).toISOString().slice(0, 19)}.${rest}(${micros})`;
    }
    case 1700: return `numeric:${decodeNumeric(buf)}`;
    default: return `oid${oid}:\\x${buf.toString('hex')}`;
  }
}

// pg 8 reads every DataRow field as a UTF-8 string, also in binary format, so
// bytes that are not valid UTF-8 reach the application as U+FFFD. Decode a
// binary value only when it came through intact; otherwise print the bytes the
// application got (still the same bytes for the same server output).
function binaryValue(oid, value) {
  const text = Buffer.isBuffer(value) ? value.toString('latin1') : value;
  if (typeof text !== 'string') return `unexpected ${typeof value}`;
  if (text.includes('\ufffd')) return `lossy:\\x${Buffer.from(text, 'utf8').toString('hex')}`;
  return decodeBinary(oid, Buffer.from(text, 'utf8'));
}

const rawText = { getTypeParser: () => (text) => text };
const rawBinary = { getTypeParser: () => (value) => value };

function describe(fields) {
  return fields.map((f) => `${f.name}:${f.dataTypeID}/size=${f.dataTypeSize}/mod=${f.dataTypeModifier}/fmt=${f.format}`).join(',');
}

function printResult(label, result, mode, withColumns) {
  if (!Array.isArray(result.rows[0] || [])) throw new Error('rows must come back as arrays (rowMode)');
  if (withColumns) out(`${label} columns: ${describe(result.fields)}`);
  for (const row of result.rows) {
    const parts = row.map((value, i) => {
      if (value === null) return 'NULL';
      if (mode === 'binary') return binaryValue(result.fields[i].dataTypeID, value);
      if (mode === 'raw') return JSON.stringify(value);
      return render(value);
    });
    out(`${label} row: ${parts.join('|')}`);
  }
}

async function expectError(label, client, query, showMessage = true) {
  try {
    await client.query(query);
    out(`${label}: NO ERROR`);
  } catch (error) {
    reportError(label, error, showMessage);
  }
}

function reportError(label, error, showMessage) {
  if (!error.code) {
    out(`${label}: non-server error ${error.message}`);
    return;
  }
  out(`${label}: error ${error.code}${showMessage ? ' ' + error.message : ''}`);
  if (showMessage && error.detail) out(`${label}: detail ${error.detail}`);
}

// A part that should succeed; a failure is printed and the program goes on.
async function step(client, label, run) {
  try {
    await run();
  } catch (error) {
    reportError(`${label} FAILED`, error, true);
    // Leave no failed transaction block behind for the next part.
    await client.query('ROLLBACK').catch(() => {});
  }
}

const ROWS = [
  [1, 32767, '9223372036854775807', '123456789.125', 0.1, 1.0000000000000002,
    'h\u00e9llo \u2603 "q" \\ end', 'varchar', 'ab', true, '2024-02-29', '2024-02-29 13:45:56.123456',
    Buffer.from([0, 0xff, 0x10, 0x27])],
  [2, -32768, '-9223372036854775808', '-0.001', -3.5e-8, -1e300, '', '', '', false, '1970-01-01',
    '1999-12-31 23:59:59', Buffer.alloc(0)],
  [3, null, null, null, null, null, null, null, null, null, null, null, null],
];
const INSERT = `INSERT INTO ${TABLE} (${COLUMNS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)`;

async function setup(client) {
  await client.query(`DROP TABLE IF EXISTS ${TABLE}`);
  await client.query(`CREATE TABLE ${TABLE} (id integer PRIMARY KEY, c_int2 smallint, c_int8 bigint,
    c_numeric numeric(15,3), c_real real, c_double double precision, c_text text, c_varchar varchar(20),
    c_char char(8), c_bool boolean, c_date date, c_ts timestamp, c_bytea bytea,
    c_required text NOT NULL DEFAULT 'required')`);
  out('create table: ok');
  await client.query('BEGIN');
  for (const row of ROWS) {
    const r = await client.query({ name: 'drv_insert', text: INSERT, values: row });
    out(`insert id=${row[0]}: ${r.command} ${r.rowCount}`);
  }
  await client.query('COMMIT');
  out('commit: ok');

  await client.query('BEGIN');
  await client.query({ name: 'drv_insert', text: INSERT, values: [10, ...ROWS[0].slice(1)] });
  out(`inside rollback: count=${(await client.query(`SELECT count(*) AS n FROM ${TABLE}`)).rows[0].n}`);
  await client.query('ROLLBACK');
  out(`after rollback: count=${(await client.query(`SELECT count(*) AS n FROM ${TABLE}`)).rows[0].n}`);

  await client.query('BEGIN');
  const update = {
    name: 'drv_update',
    text: `UPDATE ${TABLE} SET c_text = $1, c_real = c_real * 2, c_int8 = c_int8 - $2 WHERE id = $3`,
  };
  let r = await client.query({ ...update, values: ['updated', 7, 1] });
  out(`update id=1: ${r.command} ${r.rowCount}`);
  r = await client.query({ ...update, values: ['nobody', 0, 999] });
  out(`update none: ${r.command} ${r.rowCount}`);
  await client.query({ name: 'drv_insert', text: INSERT, values: [4, ...ROWS[1].slice(1)] });
  r = await client.query({ name: 'drv_delete', text: `DELETE FROM ${TABLE} WHERE id = $1`, values: [4] });
  out(`delete id=4: ${r.command} ${r.rowCount}`);
  r = await client.query({
    text: `INSERT INTO ${TABLE} (id, c_text) VALUES ($1, $2) RETURNING id, c_required, c_text`,
    values: [5, 'returned'],
    rowMode: 'array',
  });
  printResult('insert returning', r, 'parsed', false);
  await client.query('COMMIT');
  out('commit: ok');
}

async function reads(client) {
  const all = `SELECT ${COLUMNS}, c_required FROM ${TABLE} ORDER BY id`;
  // Simple protocol (no parameters), pg's parsers.
  printResult('simple parsed', await client.query({ text: all, rowMode: 'array' }), 'parsed', true);
  // Extended protocol, named statement, text exactly as sent.
  printResult('text raw', await client.query({ name: 'drv_all', text: all, types: rawText, rowMode: 'array' }), 'raw', true);
  // Extended protocol, binary results.
  printResult('binary', await client.query({ name: 'drv_all_bin', text: all, binary: true, types: rawBinary, rowMode: 'array' }), 'binary', true);

  const filtered = `SELECT id, c_numeric, c_ts, c_bytea FROM ${TABLE}
    WHERE c_int8 > $1 AND c_date >= $2 AND c_bytea <> $3 ORDER BY id`;
  const filterValues = ['-9223372036854775808', '1970-01-01', Buffer.from('n')];
  printResult('text filtered', await client.query({ text: filtered, values: filterValues, types: rawText, rowMode: 'array' }), 'raw', false);
  printResult('binary filtered', await client.query({ text: filtered, values: filterValues, binary: true, types: rawBinary, rowMode: 'array' }), 'binary', false);

  const params = `SELECT $1::numeric(10,2) AS n, $2::text AS t, $3::bytea AS b, $4::timestamp AS ts,
    $5::boolean AS flag, $6::real AS r, $7::double precision AS d, $8::smallint AS s`;
  const paramValues = ['12.345', 'x\ty', Buffer.from([1, 2]), '2001-02-03 04:05:06.000007', false, 1.5, -0.25, 12];
  printResult('text params', await client.query({ text: params, values: paramValues, types: rawText, rowMode: 'array' }), 'raw', true);
  printResult('binary params', await client.query({ text: params, values: paramValues, binary: true, types: rawBinary, rowMode: 'array' }), 'binary', true);

  // A parameter, so pg uses the extended protocol (binary results need it).
  const aggregates = `SELECT count(*), min(c_date), max(c_ts), sum(c_int2) FROM ${TABLE} WHERE id > $1`;
  printResult('text aggregates', await client.query({ text: aggregates, values: [0], types: rawText, rowMode: 'array' }), 'raw', true);
  printResult('binary aggregates', await client.query({ text: aggregates, values: [0], binary: true, types: rawBinary, rowMode: 'array' }), 'binary', true);
}

async function errors(client) {
  await expectError('unique violation', client, { text: `INSERT INTO ${TABLE} (id) VALUES ($1)`, values: [1] });
  await expectError('undefined table', client, 'SELECT * FROM drv_node_no_such_table');
  await expectError('division by zero', client, { text: `SELECT c_int2 / $1 FROM ${TABLE} WHERE id = 1`, values: [0] });
  await expectError('not null', client, { text: `INSERT INTO ${TABLE} (id, c_required) VALUES ($1, $2)`, values: [6, null] });
  await expectError('syntax error', client, 'SELEC 1', false);
  await expectError('syntax error extended', client, { text: 'SELEC $1', values: [1] }, false);
  out(`after errors: ${(await client.query('SELECT 1 AS one')).rows[0].one}`);

  await client.query('BEGIN');
  await client.query(`INSERT INTO ${TABLE} (id) VALUES (7)`);
  await expectError('in block', client, `SELECT 1 / (id - 1) FROM ${TABLE} WHERE id = 1`);
  await expectError('aborted block', client, 'SELECT 1');
  await expectError('aborted block extended', client, { text: `SELECT * FROM ${TABLE} WHERE id = $1`, values: [1], binary: true });
  await client.query('ROLLBACK');
  const ids = (await client.query(`SELECT id FROM ${TABLE} ORDER BY id`)).rows.map((row) => row.id);
  out(`after aborted block: ids=${ids.join(',')}`);
}

async function main() {
  out(`driver pg ${require('pg/package.json').version}`);
  const bad = connect(env('PGPASSWORD') + '-wrong');
  try {
    await bad.connect();
    out('wrong password: CONNECTED');
    await bad.end();
  } catch (error) {
    out(`wrong password: error ${error.code}`);
  }

  const client = connect(env('PGPASSWORD'));
  await client.connect();
  await step(client, 'setup', () => setup(client));
  await step(client, 'reads', () => reads(client));
  await step(client, 'errors', () => errors(client));
  await step(client, 'arrays', () => require('./arrays')(client, out));
  await step(client, 'types', () => typePaths(client, out, render));
  await step(client, 'tatp types', () => require('./tatp_types').run(client, out));
  await step(client, 'drop', async () => {
    await client.query(`DROP TABLE ${TABLE}`);
    out('drop table: ok');
  });
  await client.end();
  out('done');
}

main().catch((error) => {
  process.stderr.write(`fatal: ${error.stack || error}\n`);
  process.exit(1);
});
