-- Imports (docs/api.md "Import"): a file posted for import and the job that applies it, row by
-- row, in the background. Not events and not a read model: the job's working state (the file,
-- how far it got, its counts and first errors), so a rebuild or a replay neither needs nor touches
-- it. The rows it applies are commands like any other, in the event log.
CREATE TABLE imports (
  id integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (MAXVALUE 2147483647),
  org_id integer NOT NULL,
  resource text NOT NULL CHECK (resource IN ('assets', 'locations')),
  dry_run boolean NOT NULL,
  format text NOT NULL CHECK (format IN ('csv', 'xlsx')),
  file bytea NOT NULL,
  -- Who posted it, as the events of its rows record it, and the request id of the POST.
  actor jsonb NOT NULL,
  request_id text,
  status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  -- Rows in the file (known once a worker has read it), and how many of them are done, in the
  -- order they are applied (parents first): the job resumes after `done`.
  rows integer NOT NULL DEFAULT 0,
  done integer NOT NULL DEFAULT 0,
  created integer NOT NULL DEFAULT 0,
  updated integer NOT NULL DEFAULT 0,
  unchanged integer NOT NULL DEFAULT 0,
  rejected integer NOT NULL DEFAULT 0,
  -- The first 1,000 row errors, in row order: [{row, field, code, message}].
  errors jsonb NOT NULL DEFAULT '[]',
  created_at timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE INDEX imports_by_org ON imports (org_id, id);
CREATE INDEX imports_pending ON imports (id) WHERE status IN ('queued', 'running');
