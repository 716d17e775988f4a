"""A pydantic-ai model that is a script: it calls a fixed list of tools, one a turn, then answers.

Agent runs driven by it are reproducible without an LLM, so what a test sees is everything
between the tool calls and the sandbox. The example Dags in ``system_tests`` keep their own
copy, because each must run on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

# A tool's name and its arguments.
Step = tuple[str, dict]


def tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """What the tools returned so far in a run, in order."""
    return [
        part
        for message in messages
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    ]


def scripted_model(
    steps: Sequence[Step], answer: Callable[[list[ToolReturnPart]], str]
) -> FunctionModel:
    """A model that calls ``steps`` in order, each once its predecessor has returned, then
    answers with what ``answer`` makes of the tools' returns."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = tool_returns(messages)
        done = len(returns)
        if done < len(steps):
            name, args = steps[done]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{done}")])
        return ModelResponse(parts=[TextPart(answer(returns))])

    return FunctionModel(model)
