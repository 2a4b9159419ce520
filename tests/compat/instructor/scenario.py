"""Instructor's two scenarios against the gateway, run by the interpreter of its own environment.

COMPAT (JSON) names the gateway, key, model, scenario and mode; one JSON line of the outcome goes to stdout.
``multi_turn`` extracts a person from the first message, gives the result back as the assistant's turn and
extracts again after the second message. ``reask`` is Instructor's tool loop: its validator refuses the first
extraction, Instructor returns the refusal as the tool call's result and the model calls the tool again.
"""

import json
import os

import instructor
import openai
from pydantic import BaseModel, field_validator

compat = json.loads(os.environ["COMPAT"])
client = instructor.from_openai(openai.OpenAI(base_url=compat["openaiUrl"], api_key=compat["key"], max_retries=0),
                                mode=instructor.Mode(compat["mode"]))


class Person(BaseModel):
    name: str


def multi_turn() -> dict:
    messages = [{"role": "user", "content": compat["first"]}]
    first = client.chat.completions.create(model=compat["model"], response_model=Person, messages=messages,
                                           max_retries=0)
    messages += [{"role": "assistant", "content": compat["assistant"].format(name=first.name)},
                 {"role": "user", "content": compat["second"]}]
    second = client.chat.completions.create(model=compat["model"], response_model=Person, messages=messages,
                                            max_retries=0)
    return {"first": first.model_dump(), "second": second.model_dump()}


def reask() -> dict:
    seen = []

    class Checked(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def refuse_the_first(cls, value: str) -> str:
            seen.append(value)
            if len(seen) == 1:
                raise ValueError(compat["refusal"])
            return value

    answer = client.chat.completions.create(model=compat["model"], response_model=Checked, max_retries=1,
                                            messages=[{"role": "user", "content": compat["question"]}])
    return {"seen": seen, "answer": answer.model_dump()}


print(json.dumps(multi_turn() if compat["scenario"] == "multi_turn" else reask()))
