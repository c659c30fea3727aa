// The journal in S3 (`--state s3://...`) against s3rver, a real S3 protocol server: what one
// writer leaves is what a fresh reader replays, in order, through snapshots, crashes between a
// snapshot and its deletes, and writers that lost the lock and write on (zombies).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createS3Client } from "../../src/sinks/s3.js";
import { S3Journal, type S3JournalOptions, StateStoreError } from "../../src/state/s3-journal.js";
import { BUCKET, type Store, startStore } from "./helpers.js";

type Rec = { t: "add"; n: number } | { t: "name"; name: string };
interface State {
  sum: number;
  names: string[];
}

let store: Store;
let prefixes = 0;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

/** Options for a journal under a prefix of its own. */
function at(prefix: string, extra: Partial<S3JournalOptions<State, Rec>> = {}): S3JournalOptions<State, Rec> {
  return {
    client: createS3Client({ endpoint: store.endpoint }),
    location: { bucket: BUCKET, prefix },
    initial: () => ({ sum: 0, names: [] }),
    apply: (s, r) => {
      if (r.t === "add") s.sum += r.n;
      else s.names.push(r.name);
    },
    ...extra,
  };
}
const fresh = () => `state-${++prefixes}`;
const names = (prefix: string) =>
  store.list(`${prefix}/journal/`).then((l) => l.map((o) => o.key.slice(prefix.length + 9)));
const segments = async (prefix: string) => (await names(prefix)).filter((n) => n.startsWith("seg-"));
const read = (prefix: string) => S3Journal.read<State, Rec>(at(prefix));
const name = (name: string): Rec => ({ t: "name", name });

describe("the journal in S3", () => {
  it("replays every flush in order; one turn's records are one PutObject, a durable one is visible once it resolves", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1 }));
    const puts = () => store.puts(`${p}/journal/seg-`).length;
    // One turn: ten records, one object.
    await Promise.all(Array.from({ length: 10 }, (_, i) => j.append(name(`a${i}`), { durable: true })));
    expect(puts()).toBe(1);
    for (const n of ["b", "c", "d"]) {
      await j.append(name(n), { durable: true });
      // Resolved: a reader that never saw this writer finds it.
      expect((await read(p)).names.at(-1)).toBe(n);
    }
    expect(puts()).toBe(4);
    await j.close();
    expect((await read(p)).names).toEqual([...Array.from({ length: 10 }, (_, i) => `a${i}`), "b", "c", "d"]);
    expect(await segments(p)).toEqual([
      "seg-000000000001-0000000001-0000000000.jsonl",
      "seg-000000000002-0000000001-0000000001.jsonl",
      "seg-000000000003-0000000001-0000000001.jsonl",
      "seg-000000000004-0000000001-0000000001.jsonl",
    ]);
    // A second writer (a resumed run) goes on from there.
    const again = await S3Journal.open<State, Rec>(at(p, { fence: 2 }));
    expect(again.state.names).toHaveLength(13);
    await again.append(name("e"), { durable: true });
    await again.close();
    expect((await read(p)).names.at(-1)).toBe("e");
    expect((await segments(p)).at(-1)).toBe("seg-000000000005-0000000002-0000000001.jsonl");
  });

  it("sends records that need not be durable after a short delay, with the next durable one, or at close", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1, flushDelayMs: 150 }));
    const first = j.append({ t: "add", n: 1 });
    await new Promise((r) => setTimeout(r, 40));
    expect(await segments(p)).toEqual([]);
    await first;
    expect(await segments(p)).toHaveLength(1);
    // With a durable one: both in one object, at once.
    const slow = j.append({ t: "add", n: 2 });
    await j.append({ t: "add", n: 3 }, { durable: true });
    await slow;
    expect(await segments(p)).toHaveLength(2);
    expect((await read(p)).sum).toBe(6);
    // Close does not wait for the delay, and loses nothing.
    const late = await S3Journal.open<State, Rec>(at(p, { fence: 2, flushDelayMs: 60_000 }));
    void late.append({ t: "add", n: 4 });
    const t0 = Date.now();
    await late.close();
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect((await read(p)).sum).toBe(10);
  });

  it("compacts into a snapshot and deletes what it covers; a reader gets the snapshot and the segments after it", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1, compactEvery: 5 }));
    for (let i = 1; i <= 13; i++) await j.append({ t: "add", n: i }, { durable: true });
    await j.close();
    const listed = await names(p);
    const snapshots = listed.filter((n) => n.startsWith("snapshot-"));
    expect(snapshots.length).toBe(1);
    // Covered segments are gone; the ones after the snapshot stay.
    const snapSeq = Number(/^snapshot-(\d+)/.exec(snapshots[0] ?? "")?.[1]);
    const segs = await segments(p);
    expect(segs.length).toBeGreaterThan(0);
    expect(segs.length).toBeLessThan(5);
    for (const s of segs) expect(Number(/^seg-(\d+)/.exec(s)?.[1])).toBeGreaterThan(snapSeq);
    expect((await read(p)).sum).toBe((13 * 14) / 2);
    // The snapshot alone covers up to its node: a reader that sees it reads it, not the segments.
    const gets = store.requests.length;
    await read(p);
    const reads = store.requests
      .slice(gets)
      .filter((r) => r.method === "GET" && !r.query.includes("list-type"));
    expect(reads.length).toBe(1 + segs.length);
  });

  it("is whole after a crash between the snapshot and its deletes (all or some left)", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1, compactEvery: 1000 }));
    for (let i = 1; i <= 6; i++) await j.append({ t: "add", n: i }, { durable: true });
    // What a crash before the deletes leaves: the snapshot, and every object it covers.
    const before = await Promise.all(
      (await store.list(`${p}/journal/`)).map(async (o) => ({
        key: o.key,
        text: (await store.object(o.key))?.text ?? "",
      })),
    );
    await j.compact();
    await j.append({ t: "add", n: 100 }, { durable: true });
    await j.close();
    expect((await segments(p)).length).toBe(1);
    const gone = before.filter((o) => o.key.includes("/seg-"));
    // Some of the deletes done.
    await store.put(gone[0]?.key ?? "", gone[0]?.text ?? "");
    expect((await read(p)).sum).toBe(121);
    // None of them done.
    for (const o of gone) await store.put(o.key, o.text);
    expect((await read(p)).sum).toBe(121);
    // The next writer resumes from the same place, and its compaction clears the leftovers.
    const next = await S3Journal.open<State, Rec>(at(p, { fence: 2, compactEvery: 2 }));
    expect(next.state.sum).toBe(121);
    await next.append({ t: "add", n: 1 }, { durable: true });
    await next.append({ t: "add", n: 1 }, { durable: true });
    await next.close();
    expect((await read(p)).sum).toBe(123);
    // Everything of the older token went with the new writer's first snapshot.
    expect(await names(p)).toEqual([
      "claim-0000000002.json",
      "seg-000000000009-0000000002-0000000002.jsonl",
      "snapshot-000000000008-0000000002.json",
    ]);
  });

  it("ignores what a zombie writes after a newer writer read the state, and keeps what it wrote before", async () => {
    const p = fresh();
    const zombie = await S3Journal.open<State, Rec>(at(p, { fence: 1 }));
    await zombie.append(name("a"), { durable: true });
    await zombie.append(name("b"), { durable: true });
    const holder = await S3Journal.open<State, Rec>(at(p, { fence: 2 }));
    expect(holder.state.names).toEqual(["a", "b"]);
    // The zombie has not noticed yet: its writes go on, and the newer writer's too.
    await zombie.append(name("zombie-1"), { durable: true });
    await holder.append(name("c"), { durable: true });
    await zombie.append(name("zombie-2"), { durable: true });
    await holder.append(name("d"), { durable: true });
    expect((await read(p)).names).toEqual(["a", "b", "c", "d"]);
    await zombie.close();
    await holder.close();
    // Written under their own tokens, side by side.
    expect(await segments(p)).toEqual([
      "seg-000000000001-0000000001-0000000000.jsonl",
      "seg-000000000002-0000000001-0000000001.jsonl",
      "seg-000000000003-0000000001-0000000001.jsonl",
      "seg-000000000003-0000000002-0000000001.jsonl",
      "seg-000000000004-0000000001-0000000001.jsonl",
      "seg-000000000004-0000000002-0000000002.jsonl",
    ]);
  });

  it("replays what the newest writer read even when two zombies wrote past each other", async () => {
    const p = fresh();
    const g = await S3Journal.open<State, Rec>(at(p, { fence: 1 }));
    await g.append(name("a"), { durable: true });
    // f takes the lock over and reads, then stalls before writing anything.
    const f = await S3Journal.open<State, Rec>(at(p, { fence: 2 }));
    await g.append(name("g-late"), { durable: true });
    // h takes it over from f: it reads g's late write, since f wrote nothing.
    const h = await S3Journal.open<State, Rec>(at(p, { fence: 3 }));
    expect(h.state.names).toEqual(["a", "g-late"]);
    await f.append(name("f-late"), { durable: true });
    await h.append(name("h"), { durable: true });
    expect((await read(p)).names).toEqual(["a", "g-late", "h"]);
    for (const j of [g, f, h]) await j.close();
  });

  it("a zombie's compaction deletes nothing once a newer writer claimed the state, and it writes no more", async () => {
    const p = fresh();
    const zombie = await S3Journal.open<State, Rec>(at(p, { fence: 1, compactEvery: 3 }));
    await zombie.append(name("a"), { durable: true });
    const holder = await S3Journal.open<State, Rec>(at(p, { fence: 2 }));
    // The holder has read but not written yet: the zombie's snapshot must not take "a" away from it.
    for (const n of ["z1", "z2", "z3"]) await zombie.append(name(n), { durable: true });
    await zombie.append(name("z4"), { durable: true });
    await holder.append(name("b"), { durable: true });
    await zombie.close();
    await holder.close();
    expect((await read(p)).names).toEqual(["a", "b"]);
    // The zombie's compaction (after "z1", its third object) put its snapshot, found the newer
    // claim, deleted nothing and stood down: "z2" to "z4" were never written.
    expect(await names(p)).toEqual([
      "claim-0000000001.json",
      "claim-0000000002.json",
      "seg-000000000001-0000000001-0000000000.jsonl",
      "seg-000000000002-0000000001-0000000001.jsonl",
      "seg-000000000002-0000000002-0000000001.jsonl",
      "snapshot-000000000002-0000000001.json",
    ]);
  });

  it("refuses a writer whose token is older than the state's latest claim (its lock was taken over before it opened)", async () => {
    const p = fresh();
    const newer = await S3Journal.open<State, Rec>(at(p, { fence: 7, generation: "g1" }));
    await newer.append(name("a"), { durable: true });
    const late = S3Journal.open<State, Rec>(at(p, { fence: 6, generation: "g1" }));
    await expect(late).rejects.toThrow(StateStoreError);
    await expect(late).rejects.toMatchObject({ kind: "superseded" });
    await expect(late).rejects.toThrow(/token 7.*token 6/);
    await newer.close();
  });

  it("moves the tokens of a coordinator that lost its data above every token in the store", async () => {
    const p = fresh();
    const before = await S3Journal.open<State, Rec>(at(p, { fence: 9, generation: "old" }));
    await before.append(name("a"), { durable: true });
    await before.close();
    // Redis lost its data: its tokens start at 1 again, under a new generation.
    const after = await S3Journal.open<State, Rec>(at(p, { fence: 1, generation: "new" }));
    await after.append(name("b"), { durable: true });
    await after.close();
    const next = await S3Journal.open<State, Rec>(at(p, { fence: 2, generation: "new" }));
    await next.append(name("c"), { durable: true });
    await next.close();
    expect((await read(p)).names).toEqual(["a", "b", "c"]);
    expect(await segments(p)).toEqual([
      "seg-000000000001-0000000009-0000000000.jsonl",
      "seg-000000000002-0000000010-0000000009.jsonl",
      "seg-000000000003-0000000011-0000000010.jsonl",
    ]);
  });

  it("says which object is damaged: not JSON, a missing link, an object too large", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1 }));
    await j.append(name("a"), { durable: true });
    await j.append(name("b"), { durable: true });
    await j.close();
    const [first, second] = await segments(p);
    const key = `${p}/journal/${second}`;
    const good = (await store.object(key))?.text ?? "";
    await store.put(key, '{"t":"name","name":"b"}\nnot json\n');
    await expect(read(p)).rejects.toMatchObject({ kind: "damaged" });
    await expect(read(p)).rejects.toThrow(`s3://${BUCKET}/${key}: line 2 is not JSON`);
    await store.put(key, good);
    await store.remove(`${p}/journal/${first}`);
    await expect(read(p)).rejects.toThrow(
      /seg-000000000001-0000000001-\*\.jsonl \(extended by .*seg-000000000002.*\) is missing/,
    );
    const q = fresh();
    await store.put(`${q}/journal/claim-0000000003.json`, "x".repeat(100 * 1024));
    await expect(S3Journal.open<State, Rec>(at(q, { fence: 4 }))).rejects.toThrow(
      new RegExp(`s3://${BUCKET}/${q}/journal/claim-0000000003.json: .*over the 65536`),
    );
  });

  it("writes nothing once frozen, keeps a copy before --fresh, and gives up on an unreachable store in bounded time", async () => {
    const p = fresh();
    const j = await S3Journal.open<State, Rec>(at(p, { fence: 1, timeoutMs: 1_000, tries: 2 }));
    await j.append(name("a"), { durable: true });
    await j.keepCopy();
    const copies = await store.list(`${p}/before-fresh-`);
    expect(copies.map((o) => o.key.replace(/before-fresh-[^/]+/, "COPY"))).toEqual([
      `${p}/COPY/journal/claim-0000000001.json`,
      `${p}/COPY/journal/seg-000000000001-0000000001-0000000000.jsonl`,
    ]);
    j.freeze();
    await j.append(name("b"), { durable: true });
    expect(j.state.names).toEqual(["a", "b"]);
    await j.close();
    expect((await read(p)).names).toEqual(["a"]);

    const k = await S3Journal.open<State, Rec>(at(p, { fence: 2, timeoutMs: 1_000, tries: 2 }));
    await store.kill();
    try {
      const t0 = Date.now();
      const failed = k.append(name("c"), { durable: true });
      await expect(failed).rejects.toMatchObject({ kind: "unreachable" });
      await expect(failed).rejects.toThrow(
        `s3://${BUCKET}/${p}/journal/seg-000000000002-0000000002-0000000001.jsonl`,
      );
      expect(Date.now() - t0).toBeLessThan(15_000);
      // Nothing after a lost segment is written: the chain would skip it.
      await expect(k.append(name("d"), { durable: true })).rejects.toMatchObject({ kind: "unreachable" });
      await k.close();
    } finally {
      await store.restart();
    }
    expect((await read(p)).names).toEqual(["a"]);
  }, 60_000);
});
