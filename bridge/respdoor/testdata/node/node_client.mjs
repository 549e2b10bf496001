// The Node Arrow client of respdoor's tests: it writes a dense tensor as
// the original Python client's Arrow layout (one struct column per input,
// 4 rows: indiceData, indiceShape, data, shape, row i filling only field
// i), XADDs it with node-redis, polls HGETALL, DELs, and decodes the
// result with apache-arrow (one record batch per output: data float32,
// shape int32). Pinned by package-lock.json.
//
// argv: port job input uri x0,x1,...
// stdout: {"value": <the result as stored>, "data": [...], "shape": [...]}
import { createClient } from 'redis';
import {
  Field, Float32, Int32, List, Struct, Table, tableFromIPC, tableToIPC, vectorFromArray,
} from 'apache-arrow';

const [port, job, input, uri, xs] = process.argv.slice(2);
const list = (t) => new List(new Field('item', t, true));
const tensor = new Struct([
  new Field('indiceData', list(new Int32()), true),
  new Field('indiceShape', list(new Int32()), true),
  new Field('data', list(new Float32()), true),
  new Field('shape', list(new Int32()), true),
]);
const x = xs.split(',').map(Number);
const none = { indiceData: null, indiceShape: null, data: null, shape: null };
const column = vectorFromArray([
  { ...none, indiceData: [] },
  { ...none, indiceShape: [] },
  { ...none, data: x },
  { ...none, shape: [x.length] },
], tensor);
const data = Buffer.from(tableToIPC(new Table({ [input]: column }), 'stream')).toString('base64');

const db = createClient({ socket: { host: '127.0.0.1', port: Number(port) } });
db.on('error', (err) => { console.error(err); process.exit(1); });
await db.connect();
await db.xAdd(job, '*', { uri, data });
const key = `cluster-serving_${job}:${uri}`;
let value;
for (let i = 0; i < 3000 && value === undefined; i++) {
  value = (await db.hGetAll(key)).value;
  if (value === undefined) await new Promise((r) => setTimeout(r, 20));
}
if (value === undefined) throw new Error(`no result for ${key}`);
await db.del(key);
await db.quit();

const out = { value, data: [], shape: [] };
if (value !== 'NaN') {
  const t = tableFromIPC(Buffer.from(value, 'base64'));
  out.data = Array.from(t.getChildAt(0).toArray());
  out.shape = Array.from(t.getChildAt(1).toArray()).filter((v) => v);
}
console.log(JSON.stringify(out));
