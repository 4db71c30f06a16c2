-- Alert rule ids (docs/api.md "Alerts"): unique, 1..2147483647, never reused, as every surrogate id.
CREATE SEQUENCE alert_rule_ids AS integer MINVALUE 1 MAXVALUE 2147483647 NO CYCLE;
