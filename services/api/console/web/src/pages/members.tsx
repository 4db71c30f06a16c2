import { useState } from 'preact/hooks';
import { app, type Me, type Member } from '../api.js';
import { DataTable, useAction, useLoad, type Column } from '../list.js';
import { Alert, ConfirmDialog, CopyField, formatTime, Notice, PageTitle } from '../ui.js';

/**
 * Members of the current organization (admins): invite, change role, remove, unlock, send a new
 * link to choose a password; pending invitations, cancel.
 */

interface Invitation {
  email: string;
  role: string;
  invite_url: string;
  expires_at: string;
}

/** A new one-time link to choose a password (docs/web-app.md, "Lost links and passwords"). */
interface SetupLink {
  email: string;
  setup_url: string;
  expires_at: string;
}

interface PendingInvitation {
  id: string;
  email: string;
  role: string;
  issued_at: string;
  expires_at: string;
  issued_by: string;
  expired: boolean;
}

interface MemberActions {
  me: Me;
  act: (action: () => Promise<unknown>, done: string) => void;
  newLink: (member: Member) => void;
  remove: (member: Member) => void;
}

function memberColumns({ me, act, newLink, remove }: MemberActions): Array<Column<Member>> {
  return [
    { header: 'Email', cell: (member) => member.email },
    {
      header: 'Role',
      cell: (member) =>
        member.id === me.user.id ? (
          <span>{member.role} (you)</span>
        ) : (
          <select
            aria-label={`Role of ${member.email}`}
            value={member.role}
            onChange={(e) => {
              const role = e.currentTarget.value;
              act(() => app('PATCH', `/members/${encodeURIComponent(member.id)}`, { role }), `${member.email} is now ${role}.`);
            }}
          >
            <option value="viewer">viewer</option>
            <option value="operator">operator</option>
            <option value="admin">admin</option>
          </select>
        ),
    },
    { header: 'Member since', cell: (member) => formatTime(member.created_at) },
    { header: 'Last sign-in', cell: (member) => (member.last_sign_in_at ? formatTime(member.last_sign_in_at) : 'Never') },
    {
      header: 'Account',
      cell: (member) =>
        member.locked ? (
          <span class="badge locked">Locked</span>
        ) : member.status === 'invited' ? (
          <span class="badge invited" title="Has not chosen a password yet">
            Invited
          </span>
        ) : (
          <span class="badge active">Active</span>
        ),
    },
    {
      header: 'Actions',
      hiddenHeader: true,
      class: 'row-actions',
      cell: (member) => (
        <>
          {member.locked && (
            <button type="button" onClick={() => act(() => app('POST', `/members/${encodeURIComponent(member.id)}/unlock`), `${member.email} is unlocked.`)} aria-label={`Unlock ${member.email}`}>
              Unlock
            </button>
          )}
          {member.id !== me.user.id && (
            <button type="button" onClick={() => newLink(member)} aria-label={`Send a new link to ${member.email}`}>
              Send a new link
            </button>
          )}
          {member.id !== me.user.id && (
            <button type="button" class="danger" onClick={() => remove(member)} aria-label={`Remove ${member.email}`}>
              Remove
            </button>
          )}
        </>
      ),
    },
  ];
}

function invitationColumns(cancel: (invitation: PendingInvitation) => void): Array<Column<PendingInvitation>> {
  return [
    { header: 'Email', cell: (invitation) => invitation.email },
    { header: 'Role', cell: (invitation) => invitation.role },
    { header: 'Invited', cell: (invitation) => formatTime(invitation.issued_at) },
    { header: 'By', cell: (invitation) => (invitation.issued_by === 'cli' ? 'the CLI' : invitation.issued_by) },
    {
      header: 'Link',
      cell: (invitation) => (invitation.expired ? <span class="badge locked">Expired</span> : <span>Valid until {formatTime(invitation.expires_at)}</span>),
    },
    {
      header: 'Actions',
      hiddenHeader: true,
      class: 'row-actions',
      cell: (invitation) => (
        <button type="button" class="danger" onClick={() => cancel(invitation)} aria-label={`Cancel the invitation of ${invitation.email}`}>
          Cancel
        </button>
      ),
    },
  ];
}

export function MembersPage({ me }: { me: Me }) {
  const lists = useLoad(async () => {
    const [people, pending] = await Promise.all([app<{ data: Member[] }>('GET', '/members'), app<{ data: PendingInvitation[] }>('GET', '/members/invitations')]);
    return { members: people.data, invitations: pending.data };
  }, []);
  const action = useAction();
  const [removing, setRemoving] = useState<Member | null>(null);
  const [cancelling, setCancelling] = useState<PendingInvitation | null>(null);
  const [newLink, setNewLink] = useState<SetupLink | null>(null);

  const act = (fn: () => Promise<unknown>, done: string) => {
    setNewLink(null);
    void action.run(() => fn().then(lists.reload), done);
  };
  const sendLink = (member: Member) =>
    act(async () => setNewLink((await app<{ data: SetupLink }>('POST', `/members/${encodeURIComponent(member.id)}/setup-link`)).data), `A new link for ${member.email} is below.`);

  return (
    <section>
      <PageTitle>Members</PageTitle>
      <InviteForm onInvited={() => void lists.reload()} />
      {action.notice && <Notice>{action.notice}</Notice>}
      <Alert error={action.error ?? lists.error} />
      {newLink && (
        <div class="token-box" data-new-link={newLink.email}>
          <p>
            No mail is sent: give this link to {newLink.email} yourself. It works once, until {formatTime(newLink.expires_at)}, and replaces any earlier link. Their
            current password, if they have one, works until they use it; using it signs them out everywhere.
          </p>
          <CopyField id="setup-url" label={`New link for ${newLink.email}`} value={newLink.setup_url} />
        </div>
      )}
      <h2>People in {me.current_org?.name}</h2>
      <DataTable label="Members" columns={memberColumns({ me, act, newLink: sendLink, remove: setRemoving })} rows={lists.data?.members ?? null} rowKey={(m) => m.id} rowProps={(m) => ({ 'data-member': m.email })} />
      <h2>Pending invitations</h2>
      <DataTable
        label="Pending invitations"
        columns={invitationColumns(setCancelling)}
        rows={lists.data?.invitations ?? null}
        rowKey={(i) => i.id}
        rowProps={(i) => ({ 'data-invitation': i.email })}
        empty="No invitation is waiting to be accepted."
      />
      {cancelling && (
        <ConfirmDialog
          title="Cancel this invitation?"
          confirm="Cancel invitation"
          onCancel={() => setCancelling(null)}
          onConfirm={() => {
            const invitation = cancelling;
            setCancelling(null);
            act(() => app('DELETE', `/members/invitations/${encodeURIComponent(invitation.id)}`), `The invitation of ${invitation.email} was cancelled.`);
          }}
        >
          <p>
            The link given to <strong>{cancelling.email}</strong> stops working at once. You can invite them again later.
          </p>
        </ConfirmDialog>
      )}
      {removing && (
        <ConfirmDialog
          title="Remove this member?"
          confirm="Remove member"
          onCancel={() => setRemoving(null)}
          onConfirm={() => {
            const member = removing;
            setRemoving(null);
            act(() => app('DELETE', `/members/${encodeURIComponent(member.id)}`), `${member.email} was removed.`);
          }}
        >
          <p>
            <strong>{removing.email}</strong> will no longer see {me.current_org?.name}. Their sessions lose access at once.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function InviteForm({ onInvited }: { onInvited: () => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('operator');
  const action = useAction();
  const [invitation, setInvitation] = useState<Invitation | null>(null);
  async function submit(event: Event) {
    event.preventDefault();
    const answer = await action.run(() => app<{ data: Invitation }>('POST', '/members/invitations', { email, role }));
    if (!answer) return;
    setInvitation(answer.data);
    setEmail('');
    onInvited();
  }
  return (
    <form class="panel" onSubmit={submit} aria-labelledby="invite-title">
      <h2 id="invite-title">Invite someone</h2>
      <div class="inline-fields">
        <div>
          <label for="invite-email">Email</label>
          <input id="invite-email" type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        </div>
        <div>
          <label for="invite-role">Role</label>
          <select id="invite-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            <option value="viewer">viewer</option>
            <option value="operator">operator</option>
            <option value="admin">admin</option>
          </select>
        </div>
      </div>
      <Alert error={action.error} />
      <button type="submit" class="primary">
        Create invitation
      </button>
      {invitation && (
        <div class="token-box">
          <p>
            No mail is sent: give this link to {invitation.email} yourself. It works once, until {formatTime(invitation.expires_at)}.
          </p>
          <CopyField id="invite-url" label="Invitation link" value={invitation.invite_url} />
        </div>
      )}
    </form>
  );
}
