"""The built-in simulator (OpenAI's and Anthropic's APIs): a real aiohttp server on 127.0.0.1 for tests,
the demo, dry runs and the performance suite (`ifsweep serve-mock`, `python -m ifsweep.simulator`).

Its own room, beside providers/ rather than inside it: it is a server, not a way to make calls. It
answers judge prompts in the shape each registered benchmark reads (`ifsweep.benchmarks`), and imports
nothing else of ifsweep. Design notes: docs/design/simulator.md.
"""

from ifsweep.simulator.config import FAULT_NAMES, FaultRates, SimConfig
from ifsweep.simulator.server import Simulator, SimulatorThread, serve_main
from ifsweep.simulator.stats import SimStats

__all__ = ["FAULT_NAMES", "FaultRates", "SimConfig", "SimStats", "Simulator", "SimulatorThread", "serve_main"]
