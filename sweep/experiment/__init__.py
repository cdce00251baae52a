"""The experiment side, before anything launches: the experiment file loaded and checked
(``config``), its grid expanded (``grid``), every point checked against SGLang's rules into a plan
(``plan``), the plan's time estimated (``estimate``) and shown (``render``), and the dry run's scale
(``dryrun``)."""
