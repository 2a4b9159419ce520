// The openai SDK for JavaScript, on chat completions (the second turn streamed) or the Responses API (the second
// turn by previous_response_id; the tool loop with store: false, its items sent back whole).
import OpenAI from "openai";
import { compat, done, weather, calls } from "./scenario.mjs";

const client = new OpenAI({ baseURL: compat.openaiUrl, apiKey: compat.key, maxRetries: 0 });
const model = compat.model;

async function chat() {
  if (compat.scenario === "multi_turn") {
    const messages = [{ role: "user", content: compat.first }];
    const first = (await client.chat.completions.create({ model, messages })).choices[0].message;
    messages.push({ role: "assistant", content: first.content }, { role: "user", content: compat.second });
    let second = "";
    for await (const chunk of await client.chat.completions.create({ model, messages, stream: true })) {
      second += chunk.choices[0]?.delta?.content ?? "";
    }
    return { first: first.content, second };
  }
  const tools = [{ type: "function", function: {
    name: compat.toolName, description: compat.toolDescription, parameters: compat.toolParameters } }];
  const messages = [{ role: "user", content: compat.question }];
  for (;;) {
    const message = (await client.chat.completions.create({ model, messages, tools })).choices[0].message;
    if (!message.tool_calls?.length) return { calls, answer: message.content };
    messages.push(message);
    for (const call of message.tool_calls) {
      const output = weather(JSON.parse(call.function.arguments));
      messages.push({ role: "tool", tool_call_id: call.id, content: output });
    }
  }
}

async function responses() {
  if (compat.scenario === "multi_turn") {
    const first = await client.responses.create({ model, input: compat.first });
    const second = await client.responses.create({ model, input: compat.second, previous_response_id: first.id });
    return { first: first.output_text, second: second.output_text };
  }
  const tools = [{ type: "function", name: compat.toolName, description: compat.toolDescription,
                   parameters: compat.toolParameters, strict: true }];
  const input = [{ role: "user", content: compat.question }];
  for (;;) {
    const response = await client.responses.create({ model, input, tools, store: false });
    const called = response.output.filter((item) => item.type === "function_call");
    if (!called.length) return { calls, answer: response.output_text };
    input.push(...response.output);
    for (const call of called) {
      input.push({ type: "function_call_output", call_id: call.call_id, output: weather(JSON.parse(call.arguments)) });
    }
  }
}

done(compat.mode === "chat" ? await chat() : await responses());
