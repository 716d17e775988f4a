"""A pydantic-ai agent whose "model" is a script, so agent runs are reproducible without an LLM.

The script drives all four sandbox tools in the order an agent writing and running a program
would, then answers with what the program printed. A run succeeded when that answer carries the
run's own token, which only the sandbox it wrote the program into could have printed.
"""

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ToolReturnPart

from tests.scripted_model import Step, scripted_model

WORKDIR = "/srv/agent"
PROGRAM = f"{WORKDIR}/hello.py"


def _steps(token: str, command: str | None) -> list[Step]:
    return [
        ("write_file", {"path": PROGRAM, "content": f"print('{token}', 6 * 7)\n"}),
        ("run_command", {"command": command or f"python3 {PROGRAM}"}),
        ("read_file", {"path": PROGRAM}),
        ("list_directory", {"path": WORKDIR}),
    ]


def scripted_agent(token: str, *, command: str | None = None, **agent_options: Any) -> Agent:
    """An agent that writes a program printing ``token``, runs it, reads it back, lists its folder.

    ``command`` replaces the program run, for a run that must be caught mid-command;
    ``agent_options`` go to ``Agent`` as they are (an operator passes its toolsets this way).
    """

    def answer(returns: list[ToolReturnPart]) -> str:
        ran = next(part for part in returns if part.tool_name == "run_command")
        return f"The program printed: {ran.content}"

    return Agent(scripted_model(_steps(token, command), answer), **agent_options)


def succeeded(output: str, token: str) -> bool:
    """Whether a scripted run's answer carries what its own program printed."""
    return f"{token} 42" in output
