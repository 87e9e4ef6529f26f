"""Tasks graded answer by answer (exact match, per token, longest right prefix), one generator per module behind one
interface (base.py), keyed by the `data=<name>` option: the calculator, and the attention tasks that tell attention
variants apart (recall, copying, retrieval at a distance, length generalisation)."""
from gpt.data.tasks.base import Example, Line, Task, Turn
from gpt.data.tasks.calculator import Calculator
from gpt.data.tasks.copy import Copy
from gpt.data.tasks.distance import Distance
from gpt.data.tasks.length import Length
from gpt.data.tasks.recall import Recall

TASKS: dict[str, type[Task]] = {task.name: task for task in (Calculator, Recall, Copy, Distance, Length)}

__all__ = ["TASKS", "Example", "Line", "Task", "Turn"]
