"""The stage loop: which stages run, for which target, and who writes a candidate's state.

* ``registry``: the one list of stages (portability first, then the nine) and of engines;
* ``target``: ``resolve(run device, user's choice) -> Target``, the one place a target is decided;
* ``plan``: the stage plan of a kernel for a target, with the engines that can do each stage;
* ``status``: the states of a stage, a candidate and an attempt;
* ``prompts``: each stage's prompt;
* ``controller``: propose / verify / approve / reject / skip for one session, the only writer
  of candidate state;
* ``loop``: the CoVeR loop over a controller.

Import the submodules themselves; this package's top level imports nothing, so that engines
and sessions can use the registry and the target without loading the loop.
"""
