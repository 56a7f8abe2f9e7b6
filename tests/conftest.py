"""Collection settings for the suite."""

import pytest

# tests/migrate_sample/ holds torch's own behaviour, a fixture that `dlcfuzz migrate record` runs
# (tests pass its path explicitly, which pytest still collects): not a test of dlcfuzz
collect_ignore = ["migrate_sample"]

@pytest.fixture(autouse=True, scope="session")
def _profile_cache(tmp_path_factory):
    """Campaigns write the support profiles they learn into the user's cache: tests use their own, so
    that they neither read a developer's profiles nor write into them (dlcfuzz's packaged profiles still
    apply, for the pinned compiler versions)."""
    import os

    old = os.environ.get("DLCFUZZ_CACHE")
    os.environ["DLCFUZZ_CACHE"] = str(tmp_path_factory.mktemp("dlcfuzz-cache"))
    yield
    if old is None:
        os.environ.pop("DLCFUZZ_CACHE", None)
    else:
        os.environ["DLCFUZZ_CACHE"] = old


# The inner-loop subset, ``python -m pytest -m fast``: under 2 minutes on 2 cores, and at least one test of
# every module of src/dlcfuzz (whole files of unit tests, and from the other files the tests that reach a
# module cheaply; a module that runs in a compiler worker counts through the test that runs that worker).
# A prefix of a test id: a file, a test, or one parametrization.
FAST = (
    # unit tests, whole files
    *(f"tests/test_{name}.py::" for name in (
        "allocate", "architecture", "bundle", "compare", "control", "culprit", "dedup", "disruptive", "export_onnx",
        "gen", "instantiate", "intervals", "ir", "judge", "known", "localize", "metrics", "operator_record",
        "reference_trust", "spec_corners", "specs", "store", "values")),
    # backends
    "tests/test_backend_tvm.py::test_registered_and_available",
    "tests/test_backend_tvm.py::test_outputs_in_graph_order_with_graph_dtypes",
    "tests/test_backend_openvino.py::test_a_conversion_report_is_keyed_on_its_root_failure",
    "tests/test_backend_openvino.py::test_outputs_in_graph_order_with_graph_dtypes",
    "tests/test_backend_iree.py::test_registered_with_settings_and_cpu_targets",
    "tests/test_backend_iree.py::test_compile_error_keeps_the_first_most_specific_error",
    "tests/test_backend_inductor.py::test_identity_and_support",
    "tests/test_backend_inductor.py::test_model_source_is_standalone",
    "tests/test_backend_tvm_relax.py::test_module_has_functions_calls_and_tuples",
    "tests/test_backend_tvm_relax.py::test_plans_draw_passes_the_installed_tvm_has",
    "tests/test_backend_torch_frontends.py::test_torch_library_rejects_what_is_no_test",
    "tests/test_devices.py::test_parse_and_keep_devices",
    "tests/test_devices.py::test_ort_variants_with_and_without_gpu_providers",
    # export
    "tests/test_export_relax.py::test_supported_names_missing_ops",
    "tests/test_export_relax.py::test_op_matches_onnx[Resize]",  # export/resize_taps
    "tests/test_export_torch.py::test_graph_and_onnx_give_the_same_source",
    "tests/test_export_torch.py::test_table_matches_torch_ops_and_sources_are_standalone",
    "tests/test_export_torch.py::test_resize_takes_the_output_length_as_onnx_length_resized",
    # generation strategies, coverage guidance, baselines
    "tests/test_guided.py::test_coverage_outlives_graphs_and_reloads",
    "tests/test_guided.py::test_graded_acceptance",
    "tests/test_baselines.py::test_validity_check_is_optional_for_declgen_only",
    "tests/test_baselines.py::test_randoop_undoes_rejected_calls_exactly",
    "tests/test_select.py::test_nms_selection_is_what_ort_selects",
    "tests/test_triage.py::test_documented_declines_are_not_bugs",
    "tests/test_triage.py::test_integer_overflow_is_undefined_not_a_bug",
    # the campaign, workers, reduction, profiles, Ray
    "tests/test_campaign.py::test_planted_bugs_are_found_deduplicated_and_reproduced",
    "tests/test_worker.py::test_ort_in_a_worker_matches_in_process",
    "tests/test_reduce.py::test_removed_nodes_become_inputs_with_their_values",
    "tests/test_reduce.py::test_retype_follows_shrunk_inputs_and_rejects_bad_ones",
    "tests/test_profile.py::test_keys_name_the_features_a_compiler_declines",
    "tests/test_profile.py::test_an_unknown_key_is_a_decline_until_probed_and_is_run_to_learn_it",
    "tests/test_ray.py::test_guided_coverage_is_merged_at_the_driver",
    # migrate
    "tests/test_migrate_campaign.py::test_frontends_expand_compilers",
    "tests/test_migrate_campaign.py::test_instance_set_keeps_values",
    "tests/test_migrate_prioritize.py::test_apfd_hand_computed_example",
    "tests/test_migrate_prioritize.py::test_fast_puts_a_textually_different_test_early",
    "tests/test_migrate_sources.py::test_record_refuses_unsupported_or_missing_libraries",
    "tests/test_migrate_sources.py::test_unknown_source_and_missing_library",
    # torch-native programs
    "tests/test_torch_programs.py::test_registry_is_apart_from_onnx_and_large",
    "tests/test_torch_programs.py::test_generation_is_reproducible",
    "tests/test_torch_programs.py::test_in_place_writes_never_target_parameters_or_broadcast_views",
    "tests/test_torch_programs.py::test_declines_and_the_layer_in_findings",
    "tests/test_torch_programs.py::test_gen_for_inductor_writes_programs_that_run_without_dlcfuzz",
    # the command line, end to end (fuzz --backends inductor: the torch-program campaign and its backend)
    "tests/test_cli.py::test_corrupt_model_is_one_line_exit_2",
    "tests/test_cli.py::test_gen_every_strategy",
    "tests/test_cli.py::test_metrics_json",
    "tests/test_report.py::test_bad_input_is_a_one_line_report_error",
    "tests/test_report.py::test_isra_campaign_without_coverage_says_so",
    "tests/test_e2e.py::test_supports_without_a_graph_follows_from_supports_with_one",
    "tests/test_e2e.py::test_gen_for_a_backend_writes_valid_models",
    "tests/test_e2e.py::test_probe_writes_a_profile_of_what_it_ran",
    "tests/test_e2e.py::test_fuzz_runs_tests_on_the_backend[ort]",
    "tests/test_e2e.py::test_fuzz_runs_tests_on_the_backend[inductor]",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith(FAST):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="module")
def pool():
    """A worker pool of the real compilers with the default limits, one per test module."""
    pytest.importorskip("onnxruntime")
    from dlcfuzz.run.worker import PhaseLimits, WorkerPool

    p = WorkerPool(PhaseLimits())
    yield p
    p.close()
