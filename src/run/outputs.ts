// Where a run's results go (a folder, or S3) and where its local materials are staged for the
// services to fetch.
import { join, resolve } from "node:path";
import { InlineStager, type MaterialStager, S3Stager } from "../services/staging.js";
import { LocalSink } from "../sinks/local.js";
import { createS3Client, parseS3Uri, type S3ClientOptions, type S3Location, S3Sink } from "../sinks/s3.js";
import type { Sink } from "../sinks/sink.js";

/** The run's output (a folder or S3) and where its local materials are staged. */
export function outputs(
  options: { output?: string | undefined; staging?: string | undefined; s3?: S3ClientOptions | undefined },
  manifest: { dir: string; name: string; output?: string },
  cwd: string,
) {
  const target = options.output ?? manifest.output ?? "./output";
  const fromFlag = options.output !== undefined;
  const staging = options.staging ?? (isS3(target) ? `${target.replace(/\/+$/, "")}/_staging` : undefined);
  const client = isS3(target) || staging ? createS3Client(options.s3) : undefined;
  const sink: Sink =
    isS3(target) && client
      ? new S3Sink(client, withName(parseS3Uri(target), manifest.name))
      : new LocalSink(join(resolve(fromFlag ? cwd : manifest.dir, target), manifest.name));
  const stager: MaterialStager =
    staging && client ? new S3Stager(client, new S3Sink(client, parseS3Uri(staging))) : new InlineStager();
  return { sink, stager };
}

function isS3(value: string | undefined): value is string {
  return value !== undefined && /^s3:\/\//i.test(value);
}

function withName(location: S3Location, name: string): S3Location {
  return { bucket: location.bucket, prefix: location.prefix ? `${location.prefix}/${name}` : name };
}
