//! Who a use case acts for: the signed-in staff member, as the web layer's
//! extractor (or the console's session) established it. The branch-scope
//! rules live here so the API handlers and the console pages, which both
//! hand an `Acting` to the domain, apply the same ones.

use uuid::Uuid;

use crate::role::{Action, Role};
use crate::{Error, Result};

/// The staff member a use case acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acting {
    pub user_id: Uuid,
    pub role: Role,
    pub branch_id: Uuid,
    pub org_id: Uuid,
}

impl Acting {
    /// Whether the caller may act on any branch (`Action::WorkOnAnyBranch`);
    /// everyone else works on its own branch only.
    pub fn any_branch(&self) -> bool {
        Action::WorkOnAnyBranch.permits(self.role)
    }

    /// 403 unless the role policy lets the caller's role take `action`.
    pub fn require(&self, action: Action) -> Result<()> {
        if action.permits(self.role) {
            Ok(())
        } else {
            Err(Error::forbidden(format!(
                "Your role ({}) is not allowed to do this.",
                self.role
            )))
        }
    }

    /// The branch a request acts on: the caller's own, or for an admin any
    /// branch it names. A non-admin naming another branch gets 403.
    pub fn branch_scope(&self, requested: Option<Uuid>) -> Result<Uuid> {
        match requested {
            None => Ok(self.branch_id),
            Some(b) if b == self.branch_id || self.any_branch() => Ok(b),
            Some(_) => Err(Error::forbidden("You can only work on your own branch.")),
        }
    }

    /// For lists: `None` means every branch (an admin who named none).
    pub fn branch_filter(&self, requested: Option<Uuid>) -> Result<Option<Uuid>> {
        if self.any_branch() {
            Ok(requested)
        } else {
            self.branch_scope(requested).map(Some)
        }
    }

    /// Whether the caller may see an object of `branch_id`.
    pub fn can_see_branch(&self, branch_id: Uuid) -> bool {
        self.any_branch() || self.branch_id == branch_id
    }

    /// The branch a non-admin is confined to (`None`: every branch).
    pub fn own_branch(&self) -> Option<Uuid> {
        (!self.any_branch()).then_some(self.branch_id)
    }
}
