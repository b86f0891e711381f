"""The live master for DUCC plans: jobs, services and reservations on the agents
(``master``), the job driver's work items (``work``), and the plan (``plan``)."""
