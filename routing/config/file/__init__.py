"""The declarative configuration file: parse and check it whole, apply it atomically, dump it back.

The canonical form leaves out values equal to their defaults, so ``dump -> load -> dump`` is equal and
loading the same file twice changes nothing. Errors name the path of the offending entry, e.g.
``virtual_models[2].targets[0].model: unknown model "x"``.

One module per section holds everything about it: its entries parsed and checked, applied to its Django
models, dumped back, and compiled into the RoutingTable (routing.config.runtime): ``providers``,
``provider_models`` (the ``models`` section; ``model_prices`` fills its prices from the catalogue),
``contracts``, ``virtual_models``, ``tier_routes``, ``category_routes``, ``policies`` (``routing_policies``),
``teams``, ``caches`` and ``routing_settings`` (``settings``). A new field is written in its section's module
and its model. Across them: ``schema`` (the sections, ConfigError), ``checks`` and ``values`` (field checks and
conversions), ``cross_checks`` (names and graphs spanning sections), and the steps that run every section in
order: ``parse`` (read and check the file), ``apply`` (write it to the database), ``dump`` (read it back out) and
``load`` (read, check and apply a file). Import the module that holds the name: this package re-exports nothing,
so reaching the dump (as the configuration's versioning does) does not run the applier.
"""
