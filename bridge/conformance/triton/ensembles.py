"""What the ensembles make_repo.py writes answer and run; shared by make_repo.py and the checks."""

SCALE = {1: 2.0, 2: 10.0, 3: 100.0}  # scale's factor per version on disk; 1 and 2 serve

# The working ensembles: what each answers for x (numpy, FP32 [batch,3]) and how many times one
# request runs each composing model, nested ensembles included, as (model, version) -> count
# (version "" for the model's latest).
ENSEMBLES = {
    "diamond": {"outputs": {"OUT": lambda x: 3 * x + x ** 3},
                "runs": {("two_io", ""): 4}},
    "pinned": {"outputs": {"OUT": lambda x: 3 * x},
               "runs": {("scale", "1"): 1, ("two_io", ""): 1}},
    "pinned_latest": {"outputs": {"OUT": lambda x: 11 * x},
                      "runs": {("scale", "2"): 1, ("two_io", ""): 1}},
    "nested": {"outputs": {"OUT": lambda x: 4 * x + x ** 3, "OUT2": lambda x: 3 * x ** 2 + x ** 4},
               "runs": {("diamond", ""): 1, ("two_io", ""): 5}},
}
# The broken ensembles and a word their UNAVAILABLE reason must hold (lower case).
BROKEN = {"broken_unknown": "no_such_step_model", "broken_dtype": "type", "broken_version": "scale"}


