"""UI-support logic for the Streamlit workbench, kept out of ``pages/`` so it can be tested.

* ``diffmerge``: hunks of a current-vs-candidate diff and hunk-level merging (difflib).
* ``jobs``: background jobs (verifications, proposals, doctor runs) with progress and cancel.
* ``validate``: checks of pasted or uploaded kernels and specs, with clear messages.
* ``review``: the state of one candidate under review (proposed, verified, approved, ...).

Nothing here imports Streamlit, and nothing here executes kernel or model code.
"""
