// h3 serve with a real client: OpenAI's own Node.js package (the version pinned in package-lock.json, installed by
// scripts/setup.sh) makes a video end to end with videos.create / retrieve / downloadContent / list / delete, and the
// MP4 passes ffprobe; then malformed, mistyped, oversized, unauthorized and unknown requests get their status and a
// sentence while the server keeps serving. ctest runs it (server.openai_client) with H3_BINARY and H3_MODEL set.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let OpenAI, toFile;
try {
  ({ default: OpenAI, toFile } = await import('openai'));
} catch {
  throw new Error('the openai npm package is missing: scripts/setup.sh installs it (npm ci in tests/server)');
}

const binary = process.env.H3_BINARY;
const model = process.env.H3_MODEL;
assert.ok(binary && model, 'H3_BINARY and H3_MODEL name the h3 binary and the tiny model');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'h3-openai-client-'));
const KEY = 'sk-h3-test-key';
// The tiny model at a tiny canvas: a video takes a fraction of a second.
const QUICK = { size: '16x8', seconds: '1', steps: 2 };

const servers = [];
async function startServer(name, extra = []) {
  const child = spawn(binary, ['serve', '-d', model, '--device', 'cpu', '--port', '0',
    '--data-dir', path.join(scratch, name), ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    exited.then((code) => reject(new Error(`h3 serve exited (${code}) before listening: ${stderr}`)));
  });
  const server = { child, exited, base: `http://127.0.0.1:${port}`, stderr: () => stderr };
  servers.push(server);
  return server;
}

async function stop(server) {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, server.stderr());
}

after(async () => {
  for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

async function finished(client, id) {
  for (;;) {
    const v = await client.videos.retrieve(id);
    assert.ok(v.progress >= 0 && v.progress <= 100, `progress ${v.progress}`);
    if (!['queued', 'in_progress'].includes(v.status)) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

function ffprobe(file) {
  const r = spawnSync('ffprobe', ['-v', 'error', '-show_entries', 'stream=codec_type,codec_name,width,height',
    '-of', 'json', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout).streams;
}

test('the openai client makes, lists, downloads and deletes a video', async () => {
  const server = await startServer('client', ['--api-key', KEY]);
  const client = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0 });

  const created = await client.videos.create({ prompt: 'A red fox walks through fresh snow.', ...QUICK });
  assert.equal(created.object, 'video');
  assert.match(created.id, /^video_[0-9a-f]{32}$/);
  assert.ok(['queued', 'in_progress'].includes(created.status));
  assert.equal(created.size, '16x8');
  assert.equal(created.frames, 39);  // 1 s = 24 frames, rounded up to the VAE's 17·n + 5
  assert.ok(Math.abs(Number(created.seconds) - 39 / 24) <= 0.005, created.seconds);
  assert.equal(created.prompt, 'A red fox walks through fresh snow.');
  assert.equal(created.model, path.basename(model));
  assert.equal(created.error, null);
  assert.equal(typeof created.seed, 'number');  // drawn by the server, reported to reproduce the video

  const done = await finished(client, created.id);
  assert.equal(done.status, 'completed', JSON.stringify(done.error));
  assert.equal(done.progress, 100);
  assert.ok(done.completed_at >= done.created_at);

  const content = await client.videos.downloadContent(created.id);
  assert.equal(content.headers.get('content-type'), 'video/mp4');
  const mp4 = Buffer.from(await content.arrayBuffer());
  const file = path.join(scratch, 'fox.mp4');
  writeFileSync(file, mp4);
  const streams = ffprobe(file);
  const video = streams.find((s) => s.codec_type === 'video');
  assert.deepEqual([video.codec_name, video.width, video.height], ['h264', 16, 8]);
  assert.equal(streams.find((s) => s.codec_type === 'audio').codec_name, 'aac');

  // A byte range, as a video player asks for one.
  const head = await fetch(`${server.base}/v1/videos/${created.id}/content`,
    { headers: { Authorization: `Bearer ${KEY}`, Range: 'bytes=0-99' } });
  assert.equal(head.status, 206);
  assert.equal(head.headers.get('content-range'), `bytes 0-99/${mp4.length}`);
  assert.ok(Buffer.from(await head.arrayBuffer()).equals(mp4.subarray(0, 100)));

  // Its thumbnail, and the same picture as the finished video's preview.
  const thumbnail = Buffer.from(await (await client.videos.downloadContent(created.id, { variant: 'thumbnail' }))
    .arrayBuffer());
  assert.equal(thumbnail.subarray(1, 4).toString(), 'PNG');
  const preview = await fetch(`${server.base}/v1/videos/${created.id}/preview`,
    { headers: { Authorization: `Bearer ${KEY}` } });
  assert.ok(Buffer.from(await preview.arrayBuffer()).equals(thumbnail));

  // The picture as input_reference: the video starts on it (fl2va).
  const keyframed = await client.videos.create({
    prompt: 'The fox keeps walking.', ...QUICK, seed: 7,
    input_reference: await toFile(thumbnail, 'first.png', { type: 'image/png' }),
  });
  assert.equal(keyframed.seed, 7);
  assert.equal((await finished(client, keyframed.id)).status, 'completed');

  // The list, one per page: the client follows the cursor; newest first.
  const third = await client.videos.create({ prompt: 'A third fox.', ...QUICK });
  await finished(client, third.id);
  const ids = [];
  for await (const v of client.videos.list({ limit: 1 })) ids.push(v.id);
  assert.deepEqual(ids, [third.id, keyframed.id, created.id]);
  const oldest = await client.videos.list({ limit: 2, order: 'asc' });
  assert.deepEqual(oldest.data.map((v) => v.id), [created.id, keyframed.id]);
  assert.equal(oldest.has_more, true);

  const deleted = await client.videos.delete(created.id);
  assert.deepEqual(deleted, { id: created.id, object: 'video.deleted', deleted: true });
  await assert.rejects(client.videos.retrieve(created.id), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.status, 404);
    assert.equal(e.error.message, `There is no video "${created.id}".`);
    return true;
  });
  await stop(server);
});

test('bad requests get their status and one sentence; the server keeps serving', async () => {
  const server = await startServer('errors', ['--api-key', KEY, '--max-body-mb', '1']);
  const client = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0 });
  const auth = { Authorization: `Bearer ${KEY}` };
  async function call(method, route, { body, headers = {} } = {}) {
    const r = await fetch(`${server.base}${route}`, { method, body, headers: { ...auth, ...headers }, duplex: 'half' });
    const text = await r.text();
    return { status: r.status, message: JSON.parse(text).error?.message, code: JSON.parse(text).error?.code };
  }
  const json = { 'Content-Type': 'application/json' };
  const post = (body, headers = json) => call('POST', '/v1/videos', { body, headers });

  let r = await post('{"prompt": "a fox", ');
  assert.equal(r.status, 400);
  assert.match(r.message, /^the request body is not valid JSON/);
  r = await post('{"prompt": 5}');
  assert.deepEqual([r.status, r.message], [400, '"prompt" must be a string, got number']);
  r = await post('{"prompt": "a fox", "size": "big"}');
  assert.deepEqual([r.status, r.message], [400, '"size" must be WIDTHxHEIGHT in pixels, such as "864x480", got "big"']);
  r = await post('{"prompt": "a fox", "fps": 30}');
  assert.equal(r.status, 400);
  assert.match(r.message, /^unknown field "fps"/);
  // The engine's own rules, with its sentence.
  r = await post(JSON.stringify({ prompt: 'a fox', size: '17x8', steps: 2 }));
  assert.equal(r.status, 400);
  assert.match(r.message, /^The width must be a multiple of \d+ and at least \d+ pixels, got 17\.$/);
  r = await post('prompt=a+fox', { 'Content-Type': 'text/plain' });
  assert.equal(r.status, 415);
  assert.match(r.message, /^A video request is a JSON object/);
  // The openai client's own multipart form, mistyped.
  await assert.rejects(client.videos.create({ prompt: 'a fox', ...QUICK, steps: 'many' }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.error.message, '"steps" must be an integer, got the text "many"');
    return true;
  });

  // Bodies over the limit (1 MiB), with a length and sent in chunks.
  const big = JSON.stringify({ prompt: 'x'.repeat(2 << 20) });
  r = await post(big);
  assert.deepEqual([r.status, r.code], [413, 'body_too_large']);
  assert.equal(r.message, `The request body is larger than this server takes (${1 << 20} bytes).`);
  const chunks = new ReadableStream({
    start(c) { for (let i = 0; i < 40; ++i) c.enqueue(new TextEncoder().encode('x'.repeat(64 << 10))); c.close(); },
  });
  r = await post(chunks);
  assert.deepEqual([r.status, r.code], [413, 'body_too_large']);

  // Unknown ids and routes.
  await assert.rejects(client.videos.retrieve('video_unknown'), OpenAI.NotFoundError);
  await assert.rejects(client.videos.downloadContent('video_unknown'), OpenAI.NotFoundError);
  await assert.rejects(client.videos.delete('video_unknown'), OpenAI.NotFoundError);
  r = await call('GET', '/v1/nothing');
  assert.equal(r.status, 404);
  assert.match(r.message, /^No route GET \/v1\/nothing/);
  r = await call('GET', '/v1/videos?limit=500');
  assert.deepEqual([r.status, r.message], [400, '"limit" must be between 1 and 100, got 500']);

  // The API key: missing, then wrong.
  const anonymous = await fetch(`${server.base}/v1/videos`);
  assert.equal(anonymous.status, 401);
  assert.equal((await anonymous.json()).error.message,
    'This server needs an API key: send the header "Authorization: Bearer KEY".');
  const stranger = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${server.base}/v1`, maxRetries: 0 });
  await assert.rejects(stranger.videos.list(), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
    assert.equal(e.error.message, 'The API key in the Authorization header is not this server\'s.');
    return true;
  });

  // Still serving.
  assert.equal((await fetch(`${server.base}/healthz`, { headers: auth })).status, 200);
  const v = await client.videos.create({ prompt: 'Still here.', ...QUICK });
  assert.equal((await finished(client, v.id)).status, 'completed');
  const metrics = await (await fetch(`${server.base}/metrics`, { headers: auth })).text();
  assert.match(metrics, /^h3_jobs\{status="completed"\} 1$/m);
  assert.match(metrics, /^h3_queue_length 0$/m);
  assert.match(metrics, /^h3_phase_seconds_total\{phase="denoise"\} [0-9.e-]+$/m);
  await stop(server);
});

test('a full queue refuses with 429', async () => {
  const server = await startServer('queue', ['--max-queue', '1']);
  const client = new OpenAI({ apiKey: 'unused', baseURL: `${server.base}/v1`, maxRetries: 0 });
  const slow = { prompt: 'A slow fox.', size: '64x32', frames: 22, steps: 1000 };
  const results = await Promise.allSettled(Array.from({ length: 6 }, () => client.videos.create(slow)));
  const refused = results.filter((x) => x.status === 'rejected');
  assert.ok(results.filter((x) => x.status === 'fulfilled').length >= 1);
  assert.ok(refused.length >= 1, 'six slow submissions over a queue of one');
  for (const x of refused) {
    assert.ok(x.reason instanceof OpenAI.RateLimitError, String(x.reason));
    assert.equal(x.reason.error.message, 'The queue is full (at most 1 videos wait to start); try again later.');
  }
  await stop(server);
});
