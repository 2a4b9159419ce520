// Vercel's AI SDK with @ai-sdk/openai, on the Responses API (its default, `store: true`: a later turn names
// earlier output items by `item_reference`) or on chat completions. The second turn of the chat is streamed.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, jsonSchema, streamText, tool } from "ai";
import { calls, compat, done, weather } from "./scenario.mjs";

const provider = createOpenAI({ baseURL: compat.openaiUrl, apiKey: compat.key });
const model = compat.mode === "chat" ? provider.chat(compat.model) : provider.responses(compat.model);

if (compat.scenario === "multi_turn") {
  const messages = [{ role: "user", content: compat.first }];
  const first = await generateText({ model, messages, maxRetries: 0 });
  messages.push(...first.responseMessages, { role: "user", content: compat.second });
  const second = streamText({ model, messages, maxRetries: 0 });
  let text = "";
  for await (const part of second.textStream) text += part;
  done({ first: first.text, second: text });
} else {
  const getWeather = tool({
    description: compat.toolDescription,
    inputSchema: jsonSchema(compat.toolParameters),
    execute: async (args) => weather(args),
  });
  const result = await generateText({
    model, prompt: compat.question, tools: { [compat.toolName]: getWeather }, stopWhen: isStepCount(5), maxRetries: 0,
  });
  done({ calls, answer: result.text });
}
