"""The trainer side of slca-verl: what verl's v1 trainer modes hand the estimators beyond verl's own arguments.

    modes.py          ``slca_sync``, ``slca_colocate_async``, ``slca_separate_async``: verl's v1 trainer modes whose
                      advantage step fetches the rows' segment ids and reward extra info from TransferQueue and
                      hands them over (registered with verl when imported, by :mod:`slca_verl.plugin`)
    handover.py       the hand-over itself: one context the estimators read (segment ids, reward components) and
                      write (their ``slca/*`` metrics) during verl's advantage call
    reward_layout.py  where a reward's components go in the token-level ``rm_scores`` the trainer hands every
                      estimator as ``token_level_rewards`` (the agent loop applies a layout, each estimator sums its
                      components back up)

Importing this package imports none of them: the estimators read :mod:`.handover` without loading verl's trainers.
"""
