/** A failed action's reason, in sight and read aloud (role alert); nothing when there is none. */
export function ErrorAlert({ error }: { error?: string }) {
  return error ? (
    <div class="error" role="alert">
      {error}
    </div>
  ) : null;
}
