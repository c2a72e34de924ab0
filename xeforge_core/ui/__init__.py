"""UI-support logic for the Streamlit workbench (``app.py`` and ``pages/``), kept out of the pages
so that it can be tested without a browser.

* ``workbench``: the controller of one browser session: the loaded problem, the open session,
  the stage plan, the candidate under review, engine settings and background jobs; every action
  a page offers (load, start/resume, propose, verify, merge hunks, edit, approve, reject,
  restore, portability, the Flash Attention demo) calls the core API from here.
* ``review``: the states of one candidate under review (proposed, verifying, verified, approved,
  rejected); any change to the code drops its verdict until it is verified again.
* ``diffmerge``: hunks of a current-vs-candidate diff and hunk-level merging (difflib).
* ``jobs``: background jobs (verifications, CoVeR stages, device probes, the doctor) with
  progress and cancel; their results are applied on the page's thread by ``Workbench.poll``.
* ``validate``: checks of pasted or uploaded kernels and specs, with clear messages.
* ``benchdata``: the Benchmarks page's tables from the verdicts kept in a session.
* ``charts``: the roofline of a target with kernels placed on it, and speedups on a log axis
  (Plotly figures).
* ``history``: the decision log as a readable table.
* ``render``: the Streamlit widgets the pages share (verdict panel, highlighted side-by-side
  diff with hunk checkboxes, job progress with Cancel, sidebar status, kept tabs, keyboard
  shortcuts, the session's roofline); with ``problemview`` (the loaded problem's variants and
  their cost, the smaller ``ci``, the spec editor), the only modules here that import Streamlit.

Nothing here executes kernel or model code: verification runs in worker processes through
``xeforge_core.verify`` (and the CoVeR loop, ``xeforge_core.pipeline.loop``), started from
background threads.
"""
