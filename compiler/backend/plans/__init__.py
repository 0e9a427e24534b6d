"""Graph node -> operator-library kernel, for the ``llvm`` and ``cuda`` targets: the plans (:mod:`.plans`), their
compilation through ``build_op`` (:mod:`.compile`) and the host-op / int8-layer backends a model runs them with."""
