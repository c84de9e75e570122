"""Every paper pack's ``conf/`` on Hydra's search path, after ``calbench/conf``.

The packs (`calbench.packs`) are found by looking in ``calbench/papers`` and in the folders
``CALBENCH_PAPER_PACKS`` names, so ``calbench run experiment=kull_deepnet`` composes a pack's
preset as it composes the library's, and a user's own pack needs no registration.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class PaperPacksSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from calbench.packs import paper_packs

        for pack in paper_packs().values():
            if pack.conf_folder().is_dir():
                search_path.append(f"calbench-pack-{pack.name}", f"file://{pack.conf_folder()}")
