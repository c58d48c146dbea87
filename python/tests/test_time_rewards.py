"""grpofit.time_rewards: the reward functions called as TRL's `_calculate_rewards` calls them,
timed, and the seconds a completion written into the run file through the binary."""

import asyncio
import time

import pytest

import grpofit

RUN = """# my run: keep this comment
[grpofit]
stack = "trl"

[model]
model_name_or_path = "Qwen/Qwen2.5-0.5B-Instruct"

[grpo]
per_device_train_batch_size = 4
num_generations = 4
"""


def test_each_function_gets_what_trl_passes_and_the_seconds_are_a_completions():
    seen = {}

    def accuracy_reward(prompts, completions, completion_ids, answer, **kwargs):
        seen["accuracy"] = (prompts, completions, completion_ids, answer, sorted(kwargs))
        time.sleep(0.04)
        return [1.0] * len(completions)

    def format_reward(completions, **kwargs):
        time.sleep(0.02)
        return [0.0] * len(completions)

    async def judge(prompts, completions, **kwargs):
        await asyncio.sleep(0.3)
        return [0.5] * len(completions)

    async def judge_b(prompts, completions, **kwargs):
        await asyncio.sleep(0.3)
        return [0.5] * len(completions)

    completions = ["4", "five", "4.0", "IV"]
    seconds = grpofit.time_rewards(
        [accuracy_reward, format_reward, judge, judge_b],
        completions,
        prompts=["2+2?"] * 4,
        completion_ids=[[19], [20], [21], [22]],
        answer=["4"] * 4,
        trainer_state=None,
        repeat=1,
    )
    prompts, got, ids, answer, rest = seen["accuracy"]
    assert (prompts, got, ids, answer) == (["2+2?"] * 4, completions, [[19], [20], [21], [22]], ["4"] * 4)
    assert rest == ["log_extra", "log_metric", "trainer_state"]
    # 0.04 + 0.02 one after the other, the async ones together (0.3, not 0.6): 0.36 s a round
    assert 0.36 / 4 <= seconds < 0.6 / 4, seconds


def test_a_function_that_logs_through_trl_s_hooks_runs_as_in_trl():
    # trl 1.0 to 1.16 `_calculate_rewards` passes `trainer_state`, `log_extra` and `log_metric`
    # to every reward function: one that takes them by name, and logs, runs here too
    def logged(prompts, completions, completion_ids, trainer_state, log_extra, log_metric):
        log_extra("length", [len(c) for c in completions])
        log_metric("mean_length", sum(len(c) for c in completions) / len(completions))
        return [float(len(c)) for c in completions]

    seconds = grpofit.time_rewards(logged, ["a", "bb"], completion_ids=[[1], [2, 3]], repeat=1)
    assert 0.0 < seconds < 0.1, seconds


def test_a_reward_model_is_left_out_and_bad_input_is_named():
    def f(completions, **kwargs):
        return [0.0] * len(completions)

    with pytest.warns(UserWarning, match="reward model"):
        grpofit.time_rewards([f, "org/Skywork-Reward"], ["a"], repeat=1)
    with pytest.raises(grpofit.ArgumentError, match="returned 1 rewards, but 2 were expected"):
        grpofit.time_rewards(lambda completions, **k: [0.0], ["a", "b"])
    with pytest.raises(grpofit.ArgumentError, match="answer has 1 values for 2 completions"):
        grpofit.time_rewards(f, ["a", "b"], answer=["x"])
    with pytest.raises(grpofit.ArgumentError, match="no reward function"):
        with pytest.warns(UserWarning):
            grpofit.time_rewards(["org/RM"], ["a"])


def test_config_writes_reward_seconds_into_the_run_file(tmp_path):
    run = tmp_path / "run.toml"
    run.write_text(RUN)

    def slow(completions, **kwargs):
        time.sleep(0.02 * len(completions))
        return [0.0] * len(completions)

    seconds = grpofit.time_rewards(slow, ["a", "b"], config=run, repeat=1)
    written = run.read_text()
    line = next(l for l in written.splitlines() if l.startswith("reward_seconds = "))
    # to three significant figures
    assert abs(float(line.split("= ")[1]) - seconds) <= 0.005 * seconds
    assert "# my run: keep this comment" in written
    e = grpofit.estimate(config=str(run), gpu_mem="80GiB", gpu="H100", no_gpu=True, offline=True)
    rewards = next(p for p in e.json["step_time"]["phases"] if p["phase"] == "rewards")
    # 4 completions a process scores in a step (per_device_train_batch_size)
    assert abs(rewards["seconds"] - 4 * float(line.split("= ")[1])) < 1e-9


def test_a_config_that_is_not_a_path_is_the_packages_type_error_before_any_call():
    # was os.fspath's bare TypeError, raised after every round had run
    calls = []

    def f(completions, **kwargs):
        calls.append(1)
        return [0.0] * len(completions)

    for config in (42, {"grpofit": {}}):
        with pytest.raises(grpofit.ArgumentTypeError, match="config=.*a run file's path"):
            grpofit.time_rewards(f, ["a"], config=config)
    assert not calls


def test_a_function_that_cannot_take_trls_keywords_is_named_before_any_call():
    # was the function's own TypeError ("got an unexpected keyword argument 'prompts'")
    def narrow(completions):
        return [0.0] * len(completions)

    with pytest.raises(grpofit.ArgumentError, match=r"'narrow' cannot take .*prompts.*\*\*kwargs"):
        grpofit.time_rewards(narrow, ["a"], answer=["x"])

    # a function naming each keyword it takes, with **kwargs for the rest, is timed
    def named(prompts, completions, answer, **kwargs):
        return [float(a in c) for c, a in zip(completions, answer)]

    assert grpofit.time_rewards(named, ["a"], answer=["a"], repeat=1) >= 0
