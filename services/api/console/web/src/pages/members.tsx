import { useEffect, useState } from 'preact/hooks';
import { app, type Me, type Member } from '../api.js';
import { Alert, ConfirmDialog, CopyField, formatTime, Notice, PageTitle, TableScroll } from '../ui.js';

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

export function MembersPage({ me }: { me: Me }) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [removing, setRemoving] = useState<Member | null>(null);
  const [invitations, setInvitations] = useState<PendingInvitation[] | null>(null);
  const [cancelling, setCancelling] = useState<PendingInvitation | null>(null);
  const [newLink, setNewLink] = useState<SetupLink | null>(null);

  async function load() {
    try {
      const [people, pending] = await Promise.all([app<{ data: Member[] }>('GET', '/members'), app<{ data: PendingInvitation[] }>('GET', '/members/invitations')]);
      setMembers(people.data);
      setInvitations(pending.data);
    } catch (failure) {
      setError(failure);
    }
  }
  useEffect(() => {
    void load();
  }, []);

  async function act(action: () => Promise<unknown>, done: string) {
    setError(null);
    setNotice(null);
    setNewLink(null);
    try {
      await action();
      await load();
      setNotice(done);
    } catch (failure) {
      setError(failure);
    }
  }

  return (
    <section>
      <PageTitle>Members</PageTitle>
      <InviteForm onInvited={() => void load()} />
      {notice && <Notice>{notice}</Notice>}
      <Alert error={error} />
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
      {members === null ? (
        <p>Loading…</p>
      ) : (
        <TableScroll label="Members">
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Member since</th>
                <th scope="col">Last sign-in</th>
                <th scope="col">Account</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.map((member) => {
                const self = member.id === me.user.id;
                return (
                  <tr key={member.id} data-member={member.email}>
                    <td>{member.email}</td>
                    <td>
                      {self ? (
                        <span>{member.role} (you)</span>
                      ) : (
                        <select
                          aria-label={`Role of ${member.email}`}
                          value={member.role}
                          onChange={(e) => {
                            const role = e.currentTarget.value;
                            void act(() => app('PATCH', `/members/${encodeURIComponent(member.id)}`, { role }), `${member.email} is now ${role}.`);
                          }}
                        >
                          <option value="viewer">viewer</option>
                          <option value="operator">operator</option>
                          <option value="admin">admin</option>
                        </select>
                      )}
                    </td>
                    <td>{formatTime(member.created_at)}</td>
                    <td>{member.last_sign_in_at ? formatTime(member.last_sign_in_at) : 'Never'}</td>
                    <td>
                      {member.locked ? (
                        <span class="badge locked">Locked</span>
                      ) : member.status === 'invited' ? (
                        <span class="badge invited" title="Has not chosen a password yet">
                          Invited
                        </span>
                      ) : (
                        <span class="badge active">Active</span>
                      )}
                    </td>
                    <td class="row-actions">
                      {member.locked && (
                        <button
                          type="button"
                          onClick={() => void act(() => app('POST', `/members/${encodeURIComponent(member.id)}/unlock`), `${member.email} is unlocked.`)}
                          aria-label={`Unlock ${member.email}`}
                        >
                          Unlock
                        </button>
                      )}
                      {!self && (
                        <button
                          type="button"
                          onClick={() =>
                            void act(async () => {
                              const { data } = await app<{ data: SetupLink }>('POST', `/members/${encodeURIComponent(member.id)}/setup-link`);
                              setNewLink(data);
                            }, `A new link for ${member.email} is below.`)
                          }
                          aria-label={`Send a new link to ${member.email}`}
                        >
                          Send a new link
                        </button>
                      )}
                      {!self && (
                        <button type="button" class="danger" onClick={() => setRemoving(member)} aria-label={`Remove ${member.email}`}>
                          Remove
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableScroll>
      )}
      <h2>Pending invitations</h2>
      {invitations === null ? (
        <p>Loading…</p>
      ) : invitations.length === 0 ? (
        <p>No invitation is waiting to be accepted.</p>
      ) : (
        <TableScroll label="Pending invitations">
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Invited</th>
                <th scope="col">By</th>
                <th scope="col">Link</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {invitations.map((invitation) => (
                <tr key={invitation.id} data-invitation={invitation.email}>
                  <td>{invitation.email}</td>
                  <td>{invitation.role}</td>
                  <td>{formatTime(invitation.issued_at)}</td>
                  <td>{invitation.issued_by === 'cli' ? 'the CLI' : invitation.issued_by}</td>
                  <td>
                    {invitation.expired ? <span class="badge locked">Expired</span> : <span>Valid until {formatTime(invitation.expires_at)}</span>}
                  </td>
                  <td class="row-actions">
                    <button type="button" class="danger" onClick={() => setCancelling(invitation)} aria-label={`Cancel the invitation of ${invitation.email}`}>
                      Cancel
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {cancelling && (
        <ConfirmDialog
          title="Cancel this invitation?"
          confirm="Cancel invitation"
          onCancel={() => setCancelling(null)}
          onConfirm={() => {
            const invitation = cancelling;
            setCancelling(null);
            void act(() => app('DELETE', `/members/invitations/${encodeURIComponent(invitation.id)}`), `The invitation of ${invitation.email} was cancelled.`);
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
            void act(() => app('DELETE', `/members/${encodeURIComponent(member.id)}`), `${member.email} was removed.`);
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
  const [error, setError] = useState<unknown>(null);
  const [invitation, setInvitation] = useState<Invitation | null>(null);
  async function submit(event: Event) {
    event.preventDefault();
    setError(null);
    try {
      const { data } = await app<{ data: Invitation }>('POST', '/members/invitations', { email, role });
      setInvitation(data);
      setEmail('');
      onInvited();
    } catch (failure) {
      setError(failure);
    }
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
      <Alert error={error} />
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
