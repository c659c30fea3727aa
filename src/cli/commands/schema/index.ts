// `clapper schema`: the manifest's JSON Schema, exactly the text of schema/manifest.schema.json.
import { manifestSchema, manifestSchemaText } from "../../../manifest/schema.js";

export interface SchemaAnswer {
  schema: Record<string, unknown>;
  /** The file's text, ending with a newline. */
  text: string;
}

export async function schema(): Promise<SchemaAnswer> {
  return { schema: manifestSchema(), text: manifestSchemaText() };
}
