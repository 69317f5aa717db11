// The official TypeScript SDK's client against a served tool collection (the reference tools of
// tests/fixtures/mcp_reference_tools.py): prints what it saw as one JSON object.
//
//   node sdk_client.mjs http http://127.0.0.1:PORT/mcp
//   node sdk_client.mjs stdio <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [kind, target, ...args] = process.argv.slice(2);
const transport =
  kind === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args, env: process.env, stderr: "ignore" });
const client = new Client(
  { name: "ts-sdk-test", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { approve: true } };
});
await client.connect(transport);
const listed = await client.listTools();
const progress = [];
const report = {
  protocolVersion: transport.protocolVersion ?? null,
  tools: listed.tools.map((tool) => tool.name),
  addInput: listed.tools.find((tool) => tool.name === "add").inputSchema,
  addOutput: listed.tools.find((tool) => tool.name === "add").outputSchema,
  add: await client.callTool({ name: "add", arguments: { a: 2, b: 3 } }),
  invalid: await client.callTool({ name: "add", arguments: { a: "2", b: 3 } }),
  image: await client.callTool({ name: "test_image_content", arguments: {} }),
  approval: await client.callTool({ name: "delete_note", arguments: { note: "ts" } }),
  progressed: await client.callTool({ name: "test_tool_with_progress", arguments: {} }, undefined, {
    onprogress: (notification) => progress.push(notification.progress),
  }),
};
report.asked = asked;
report.progress = progress;
process.stdout.write(JSON.stringify(report) + "\n");
await client.close();
