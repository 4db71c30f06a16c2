import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, EXPORT_FORMATS, publicApi, publicUpload, type ImportJob, type ImportResource, type ImportRowError, type ListPage } from '../api.js';
import { DataTable, useLoad, type Column } from '../list.js';
import { fieldWords, IMPORT_COLUMNS, importFileMessage, importRowMessage } from '../messages.js';
import { Alert, formatTime, Notice, PageTitle } from '../ui.js';

/**
 * The Import page (docs/console.md, "Import"), for operators and admins: a CSV or XLSX file of
 * assets or locations is first posted as a dry run (`POST /api/v1/imports?dry_run=true`,
 * docs/api.md "Import") and its preview shown, every row's error in words beside its row and
 * column; only then **Apply import** posts it for real, and the page follows the job (polling
 * `GET /imports/{id}`) until it ends.
 */

/** The largest file the API takes (docs/api.md "Import"): a larger one is refused here, unsent. */
const MAX_BYTES = 50 * 1024 * 1024;
/** How often a running job is read again. */
const POLL_MS = 400;
/** Imports listed under Recent imports. */
const RECENT = 20;

const KIND_WORDS: Record<ImportResource, { plural: string; Plural: string }> = {
  assets: { plural: 'assets', Plural: 'Assets' },
  locations: { plural: 'locations', Plural: 'Locations' },
};

const STATUS_WORDS: Record<ImportJob['status'], string> = { queued: 'Queued', running: 'Running', succeeded: 'Done', failed: 'Failed' };

const finished = (job: ImportJob) => job.status === 'succeeded' || job.status === 'failed';
const done = (job: ImportJob) => job.created + job.updated + job.unchanged + job.rejected;

/** The Content-Type of a chosen file: by its name, else an XLSX by its zip signature; anything else is sent as CSV, and the API says whether it is one. */
async function contentTypeOf(file: File): Promise<string> {
  const name = file.name.toLowerCase();
  if (name.endsWith('.xlsx')) return EXPORT_FORMATS.xlsx;
  if (name.endsWith('.csv')) return EXPORT_FORMATS.csv;
  const head = new Uint8Array(await file.slice(0, 2).arrayBuffer());
  return head[0] === 0x50 && head[1] === 0x4b ? EXPORT_FORMATS.xlsx : EXPORT_FORMATS.csv;
}

/** A refusal of the whole file, in words: each refused column, or why the file is none of CSV and XLSX. */
function refusalWords(failure: unknown, resource: ImportResource): string[] {
  if (failure instanceof ApiFailure) {
    if (failure.status === 413) return ['The file is larger than 50 MiB, the most an import takes.'];
    if (failure.status === 415) return ['The file is neither CSV nor XLSX.'];
    if (failure.fields.length > 0) return failure.fields.map((f) => importFileMessage(f, resource));
    return [failure.message];
  }
  return [failure instanceof Error ? failure.message : String(failure)];
}

/** Downloads the header row of `resource`'s file: the columns an import reads, as an export writes them. */
function downloadTemplate(resource: ImportResource) {
  const url = URL.createObjectURL(new Blob([`${IMPORT_COLUMNS[resource].join(',')}\r\n`], { type: 'text/csv' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = `${resource}-template.csv`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

type Stage =
  | { step: 'idle' }
  | { step: 'refused'; messages: string[] }
  | { step: 'checking'; job: ImportJob | null }
  | { step: 'checked'; job: ImportJob }
  | { step: 'applying'; preview: ImportJob; job: ImportJob | null }
  | { step: 'applied'; preview: ImportJob; job: ImportJob };

export function ImportPage() {
  const wanted = new URLSearchParams(window.location.search).get('resource');
  const [resource, setResource] = useState<ImportResource>(wanted === 'locations' ? 'locations' : 'assets');
  const [file, setFile] = useState<File | null>(null);
  const [stage, setStage] = useState<Stage>({ step: 'idle' });
  const [dragging, setDragging] = useState(false);
  // Each new file or kind starts a new round: a job followed for an older one stops updating the page.
  const round = useRef(0);
  const [recentRound, setRecentRound] = useState(0);
  const recent = useLoad(() => publicApi<ListPage<ImportJob>>('/imports', { limit: RECENT }), [recentRound]);
  useEffect(
    () => () => {
      round.current++;
    },
    [],
  );

  /** Posts the file (a dry run or not) and follows its job until it ends; null once a newer round began. */
  async function run(chosen: File, kind: ImportResource, dryRun: boolean, onProgress: (job: ImportJob) => void): Promise<ImportJob | null> {
    const mine = round.current;
    const type = await contentTypeOf(chosen);
    let { data: job } = await publicUpload<{ data: ImportJob }>(`/imports?resource=${kind}&dry_run=${dryRun}`, chosen, type);
    setRecentRound((n) => n + 1);
    while (!finished(job)) {
      if (mine !== round.current) return null;
      onProgress(job);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      ({ data: job } = await publicApi<{ data: ImportJob }>(`/imports/${job.id}`));
    }
    setRecentRound((n) => n + 1);
    return mine === round.current ? job : null;
  }

  async function check(chosen: File | null, kind: ImportResource) {
    const mine = ++round.current;
    if (!chosen) return setStage({ step: 'idle' });
    if (chosen.size > MAX_BYTES) return setStage({ step: 'refused', messages: ['The file is larger than 50 MiB, the most an import takes.'] });
    setStage({ step: 'checking', job: null });
    try {
      const job = await run(chosen, kind, true, (job) => setStage({ step: 'checking', job }));
      if (job) setStage({ step: 'checked', job });
    } catch (failure) {
      if (mine === round.current) setStage({ step: 'refused', messages: refusalWords(failure, kind) });
    }
  }

  async function apply(preview: ImportJob) {
    if (!file) return;
    const mine = ++round.current;
    setStage({ step: 'applying', preview, job: null });
    try {
      const job = await run(file, preview.resource, false, (job) => setStage({ step: 'applying', preview, job }));
      if (job) setStage({ step: 'applied', preview, job });
    } catch (failure) {
      if (mine === round.current) setStage({ step: 'refused', messages: refusalWords(failure, preview.resource) });
    }
  }

  function choose(next: File | null) {
    setFile(next);
    void check(next, resource);
  }

  const busy = stage.step === 'checking' || stage.step === 'applying';
  return (
    <section>
      <PageTitle>Import</PageTitle>
      <p class="hint">
        Create or change many assets or locations at once from a CSV or XLSX file, one row each, matched by key (an export of the list imports back unchanged). The file is checked first
        and nothing changes until you apply it.
      </p>
      <div class="panel">
        <fieldset class="import-kind">
          <legend>What the rows are</legend>
          {(['assets', 'locations'] as const).map((kind) => (
            <label key={kind} class="check">
              <input
                type="radio"
                name="import-resource"
                value={kind}
                checked={resource === kind}
                disabled={busy}
                onChange={() => {
                  setResource(kind);
                  if (file) void check(file, kind);
                }}
              />
              {KIND_WORDS[kind].Plural}
            </label>
          ))}
        </fieldset>
        <div
          class={`drop-zone${dragging ? ' dragging' : ''}`}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            const dropped = e.dataTransfer?.files[0];
            if (dropped && !busy) choose(dropped);
          }}
        >
          <label for="import-file">File (CSV or XLSX, at most 50 MiB)</label>
          <input
            id="import-file"
            type="file"
            accept={`.csv,.xlsx,${EXPORT_FORMATS.csv},${EXPORT_FORMATS.xlsx}`}
            disabled={busy}
            aria-describedby="import-file-hint"
            onChange={(e) => choose(e.currentTarget.files?.[0] ?? null)}
          />
          <span id="import-file-hint" class="hint">
            Or drop the file here. Its first row names the columns; <span class="mono">external_key</span> is required.
          </span>
        </div>
        <div class="row-actions">
          <button type="button" onClick={() => downloadTemplate(resource)}>
            Download a template ({KIND_WORDS[resource].plural}, CSV)
          </button>
        </div>
      </div>
      <Outcome stage={stage} fileName={file?.name ?? ''} onApply={(preview) => void apply(preview)} />
      <h2>Recent imports</h2>
      <Alert error={recent.error} />
      <DataTable label="Recent imports" tableClass="wide stack" columns={RECENT_COLUMNS} rows={recent.data?.data ?? null} rowKey={(job) => job.id} empty="No import yet." />
    </section>
  );
}

function Outcome({ stage, fileName, onApply }: { stage: Stage; fileName: string; onApply: (preview: ImportJob) => void }) {
  switch (stage.step) {
    case 'idle':
      return null;
    case 'refused':
      return (
        <div class="alert import-refused" role="alert">
          <p>The file was refused; nothing was imported.</p>
          <ul>
            {stage.messages.map((message, i) => (
              <li key={i}>{message}</li>
            ))}
          </ul>
        </div>
      );
    case 'checking':
      return <Progress job={stage.job} label={`Checking ${fileName} (nothing is changed yet)…`} />;
    case 'checked':
      return <Preview job={stage.job} fileName={fileName} onApply={onApply} />;
    case 'applying':
      return <Progress job={stage.job} label={`Importing ${fileName}…`} />;
    case 'applied':
      return <Applied job={stage.job} />;
  }
}

/** Rows done of the file's rows, live, as the job reads and applies them. */
function Progress({ job, label }: { job: ImportJob | null; label: string }) {
  const total = job?.rows ?? 0;
  const count = job ? done(job) : 0;
  return (
    <div class="panel import-progress">
      <p>{label}</p>
      <progress max={total || 1} value={total ? count : undefined} aria-label="Rows done" />
      <p role="status" class="import-done">
        {!job || job.status === 'queued' ? 'Waiting for the file to be read…' : `${count} of ${total} rows done`}
      </p>
    </div>
  );
}

/** An import's counts; `would` for a dry run. */
function Counts({ job }: { job: ImportJob }) {
  const would = job.dry_run;
  const items: Array<[string, number, string]> = [
    ['Rows', job.rows, 'rows'],
    [would ? 'To create' : 'Created', job.created, 'created'],
    [would ? 'To update' : 'Updated', job.updated, 'updated'],
    ['Unchanged', job.unchanged, 'unchanged'],
    ['Rejected', job.rejected, 'rejected'],
  ];
  return (
    <dl class="import-counts">
      {items.map(([label, value, name]) => (
        <div key={name} data-count={name} class={name === 'rejected' && value > 0 ? 'some' : undefined}>
          <dt>{label}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

const ERROR_COLUMNS: Array<Column<ImportRowError>> = [
  { header: 'Row', cell: (error) => error.row },
  {
    header: 'Column',
    cell: (error) =>
      error.field === 'row' ? (
        'the whole row'
      ) : (
        <>
          {fieldWords(error.field)} <span class="mono hint">{error.field}</span>
        </>
      ),
  },
  { header: 'Error', cell: (error) => importRowMessage(error) },
];

/** Every refused row: its number, its column, why. */
function RowErrors({ job }: { job: ImportJob }) {
  if (job.errors.length === 0) return null;
  return (
    <>
      <h3>Rows with an error</h3>
      {job.rejected > job.errors.length && <p class="hint">The first {job.errors.length} errors are shown.</p>}
      <DataTable
        label="Rows with an error"
        columns={ERROR_COLUMNS}
        rows={job.errors}
        rowKey={(error) => `${error.row}\0${error.field}\0${error.code}\0${error.message}`}
        rowProps={(error) => ({ 'data-row': String(error.row), 'data-field': error.field })}
      />
    </>
  );
}

/** A file the job could not read whole: its one error, on the file. */
function FileFailed({ job }: { job: ImportJob }) {
  return (
    <p class="alert" role="alert">
      The file could not be read: {job.errors.map(importRowMessage).join(' ') || 'no reason was given.'} Nothing was imported.
    </p>
  );
}

function Preview({ job, fileName, onApply }: { job: ImportJob; fileName: string; onApply: (preview: ImportJob) => void }) {
  if (job.status === 'failed') return <FileFailed job={job} />;
  const changes = job.created + job.updated;
  return (
    <div class="panel import-preview" aria-labelledby="preview-title">
      <h2 id="preview-title">Preview: nothing has been changed yet</h2>
      <p class="hint">
        {fileName}, as {KIND_WORDS[job.resource].plural}
      </p>
      <Counts job={job} />
      <RowErrors job={job} />
      {changes === 0 ? (
        <Notice>Nothing to apply: {job.rejected > 0 ? 'every row that would change something has an error.' : 'every row is unchanged.'}</Notice>
      ) : (
        <>
          {job.rejected > 0 && (
            <p class="hint">
              {job.rejected} row{job.rejected === 1 ? ' has' : 's have'} an error and will be skipped; fix the file and choose it again to import {job.rejected === 1 ? 'it' : 'them'} too.
            </p>
          )}
          <button type="button" class="primary" onClick={() => onApply(job)}>
            Apply import
          </button>
        </>
      )}
    </div>
  );
}

function Applied({ job }: { job: ImportJob }) {
  if (job.status === 'failed') return <FileFailed job={job} />;
  return (
    <div class="panel import-applied">
      <Notice>
        Import finished: {job.created} created, {job.updated} updated, {job.unchanged} unchanged, {job.rejected} rejected.
      </Notice>
      <Counts job={job} />
      <RowErrors job={job} />
      <p>
        {job.resource === 'assets' ? (
          <>
            <a href="/assets">See the assets</a> <span class="hint">(Where things are: its search finds assets that have no read yet)</span>
          </>
        ) : (
          <a href="/locations">See the locations</a>
        )}
      </p>
    </div>
  );
}

const RECENT_COLUMNS: Array<Column<ImportJob>> = [
  { header: 'Started', cell: (job) => formatTime(job.created_at) },
  { header: 'Records', cell: (job) => KIND_WORDS[job.resource].Plural },
  { header: 'Kind', cell: (job) => (job.dry_run ? 'Check (dry run)' : 'Import') },
  { header: 'Status', cell: (job) => <span class={`badge ${job.status === 'failed' ? 'failed' : job.status === 'succeeded' ? 'succeeded' : 'pending'}`}>{STATUS_WORDS[job.status]}</span> },
  { header: 'Rows', cell: (job) => (finished(job) ? job.rows : `${done(job)} of ${job.rows}`) },
  { header: 'Created', cell: (job) => job.created },
  { header: 'Updated', cell: (job) => job.updated },
  { header: 'Unchanged', cell: (job) => job.unchanged },
  { header: 'Rejected', cell: (job) => job.rejected },
  { header: 'Finished', cell: (job) => formatTime(job.finished_at) },
];
